"""Standard's forward launches: Nsight Compute (ncu/) against the model (CPU), per launch.

    python experiments/2026-12-02-standard-fwd/compare.py

The model runs at sm_clock_hz = 1.97 GHz, the clock ncu saw in the softmax launch (the
MMA launches at tensor_clock_ratio x that, 1.79 GHz; ncu saw 1.68-1.80).
"""

import collections
import csv
import json
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
NAMES = {"_qk_kernel": "qk", "_softmax_kernel": "softmax", "_pv_kernel": "pv"}


def measured(path):
    out = collections.OrderedDict()
    for r in csv.reader(path.open()):
        if len(r) > 14 and r[0] != "ID":
            out.setdefault(NAMES[r[4]], {})[r[12]] = float(r[14].replace(",", ""))
    return out


def main():
    for path in sorted((HERE / "ncu").glob("ncu_*.csv")):
        algo, b, h, n, d, c, dt = CASES[path.stem[4:]]
        cmd = ["tilesim", "predict", "--gpu", "h200-cal", "--algo", algo, "-b", b, "-H", h]
        cmd += ["-n", n, "-d", d, "--dtype", dt, "--set", "sm_clock_hz=1.97e9", "--json"]
        cmd += ["--causal"] if c == "1" else []
        pred = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(f"{path.stem[4:]}: B{b} H{h} N{n} d{d} {'causal' if c == '1' else 'full'} {dt}")
        tot_m = tot_p = 0.0
        for launch in pred["launches"]:
            m = measured(path)[launch["name"]]
            t = m["gpu__time_duration.sum"] * 1e-9
            rd, wr = m["dram__bytes_read.sum"], m["dram__bytes_write.sum"]
            tot_m, tot_p = tot_m + t, tot_p + launch["time_s"]
            print(
                f"  {launch['name']:8s} time {t * 1e6:8.1f} vs {launch['time_s'] * 1e6:8.1f} us"
                f" ({launch['time_s'] / t - 1:+6.1%})  read {rd / 1e6:7.0f} vs"
                f" {launch['hbm_read_bytes'] / 1e6:7.0f} MB  write {wr / 1e6:7.0f} vs"
                f" {launch['hbm_write_bytes'] / 1e6:7.0f} MB  {launch['bound']}"
            )
        err = tot_p / tot_m - 1
        print(f"  all      time {tot_m * 1e6:8.1f} vs {tot_p * 1e6:8.1f} us ({err:+6.1%})")


CASES = {}
for line in (HERE / "gpu.sh").read_text().split("<<'CASES'\n")[1].split("CASES")[0].splitlines():
    if line.strip():
        name, *rest = line.split()
        CASES[name] = rest

if __name__ == "__main__":
    main()
