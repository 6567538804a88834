"""Check, then time, v3's Gluon warp-specialised kernel against the Triton v3 (GPU only).

    python experiments/2026-11-30-tuning/probe_v3_gluon.py --out DIR \
        [--variants a,b:fp8] [--hang-s 45]

Shapes: B·N = 16k tokens, H = 16, d = 128, N in 4096, 8192, 16384, causal off and
on, fp16 and fp8 (e4m3, per-tensor descales). Each variant (a kernel config, see
``VARIANTS``) runs in its own subprocess per dtype under a hard timeout, so a
deadlocked kernel costs ``--hang-s`` seconds and nothing else (``name:dtype`` in
``--variants`` runs that variant in one dtype only). Variants with keyword
arguments call ``gluon.launches`` directly (schedules KernelConfig cannot
describe). In the subprocess, every shape is first checked (NaN-poisoned
output, fresh random inputs; every element written, and the first and last head
against a float32 reference by row chunks), then timed with
``triton.testing.do_bench`` (L2 flushed, median) over all the variant's launches
(fp8: the V transpose too). TFLOPS = 4·B·H·N²·d / t, half for causal. One JSON
line per measurement goes to ``DIR/probe_v3_gluon.jsonl``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import triton

from tilesim.kernels import gluon, launches, quantize_fp8
from tilesim.traces.workload import PAPER_HIDDEN, PAPER_TOKENS, KernelConfig, Workload

D = 128
HEADS = PAPER_HIDDEN // D
SEQLENS = (4096, 8192, 16384)
TOL = {"fp16": 5e-3, "fp8": 0.1}
WS3 = KernelConfig(128, 128, 8, 3, "wgmma", warp_specialize=True)
WS3_PP = WS3.replace(pingpong=True)
# name -> (KernelConfig or None for the API's default v3 config, gluon.launches
# keyword arguments or None for the API path): experiments KernelConfig does not describe
# (consumer_groups=3: 192 rows per CTA; permute_p: the fp8 P operand without lane
# shuffles, V's keys permuted to match). The lazy-rescale and P-through-shared-memory
# schedules of the 2026-11-30 fp8 log were measured from a patch not kept (README.md).
VARIANTS = {
    "v3_default": (None, None),
    "gluon_pp_s2": (WS3.replace(num_stages=2, pingpong=True), None),
    "gluon_nopp_s2": (WS3.replace(num_stages=2), None),
    "gluon_pp_s3": (WS3_PP, None),
    "gluon_nopp_s3": (WS3, None),
    "gluon3_bn64_nopp_s3": (WS3.replace(block_n=64), dict(consumer_groups=3)),
    "gluon3_bn64_pp_s3": (WS3_PP.replace(block_n=64), dict(consumer_groups=3)),
    "gluon_old_permp_s3": (WS3, dict(permute_p=True)),
    "gluon_old_permp_s2": (WS3.replace(num_stages=2), dict(permute_p=True)),
    "gluon_pp_old_permp_s3": (WS3_PP, dict(permute_p=True)),
    # 2026-11-30 fifth session: the persistent grid; q_buffers=None double-buffers Q
    # where shared memory allows (fp8), else single. The merged ring release
    # (merge_empty), the fused V transpose (fuse_vt) and the next-tile S(0) prefetch
    # (prefetch) measured slower and were removed (README.md; code and probe variants
    # at 919fefa). Seventh session: O by TMA store (o_tma), row max/sum as trees (tree) and
    # P V waited with S (wait0) were not faster and were removed too (README.md; at def45b2).
    "persist_qauto_s3": (WS3.replace(persistent=True), dict()),
    "persist_q1_s3": (WS3.replace(persistent=True), dict(q_buffers=1)),
    "new_np_s3": (WS3, dict()),
    # "module": the same kernel config run by an uncommitted older copy of the kernel
    # (e.g. ``git show REV:kernels/gluon.py > kernels/_v3_gluon_base.py``), for
    # same-call comparisons
    "base_persist_s3": (WS3.replace(persistent=True), dict(module="_v3_gluon_base")),
    "base_np_s3": (WS3, dict(module="_v3_gluon_base")),
}


def _reference_rows(q, k, v, causal, sm_scale, bh):
    """float32 attention of flat head ``bh`` ([B*H, N, d] views), in row chunks."""
    qf, kf, vf = (t[bh].float() for t in (q, k, v))
    n = qf.shape[0]
    out = torch.empty_like(qf)
    for r0 in range(0, n, 2048):
        s = (qf[r0 : r0 + 2048] @ kf.T) * sm_scale
        if causal:
            rows = torch.arange(r0, min(r0 + 2048, n), device=q.device)[:, None]
            s = s.masked_fill(torch.arange(kf.shape[0], device=q.device)[None, :] > rows, -1e30)
        out[r0 : r0 + 2048] = torch.softmax(s, dim=-1) @ vf
    return out


def _one(variant: str, dtype: str, out_path: Path) -> None:
    """All shapes of one variant and dtype (runs in a subprocess)."""
    config, gluon_kwargs = VARIANTS[variant]
    for n in SEQLENS:
        batch = PAPER_TOKENS // n
        gen = torch.Generator(device="cuda").manual_seed(n + (1 if dtype == "fp8" else 0))
        shape = (batch, HEADS, n, D)
        q, k, v = (torch.randn(shape, device="cuda", generator=gen) for _ in range(3))
        extra = {}
        if dtype == "fp8":
            (q, sq), (k, sk), (v, sv) = (quantize_fp8(2.0 * t) for t in (q, k, v))
            extra = dict(q_scale=sq, k_scale=sk, v_scale=sv)
            deq = [t.float() * s for t, s in ((q, sq), (k, sk), (v, sv))]
        else:
            q, k, v = (t.half() for t in (q, k, v))
            deq = [q, k, v]
        for causal in (False, True):
            row = dict(
                variant=variant,
                dtype=dtype,
                n=n,
                batch=batch,
                heads=HEADS,
                d=D,
                causal=causal,
                config=None if config is None else config.to_dict(),
                gluon_kwargs=gluon_kwargs,
            )
            out = torch.full(shape, float("nan"), dtype=torch.float16, device="cuda")
            try:
                if gluon_kwargs is not None:
                    kwargs = dict(gluon_kwargs)
                    module = gluon
                    if "module" in kwargs:  # an older copy of the kernel, for comparison
                        module = importlib.import_module(f"tilesim.kernels.{kwargs.pop('module')}")
                    runs = module.launches(q, k, v, causal, D**-0.5, config, out, **kwargs, **extra)
                else:
                    out, runs = launches(
                        q, k, v, causal=causal, algo="v3", config=config, out=out, **extra
                    )
                for _, run in runs:
                    run()
                torch.cuda.synchronize()
                nan = bool(torch.isnan(out).any())
                errs = []
                flat = [t.reshape(batch * HEADS, n, D) for t in deq]
                o = out.reshape(batch * HEADS, n, D)
                for bh in (0, batch * HEADS - 1):
                    ref = _reference_rows(*flat, causal, D**-0.5, bh)
                    errs.append(float((o[bh].float() - ref).norm() / ref.norm()))
                row.update(nan=nan, rel_error=max(errs))
                ok = not nan and max(errs) < TOL[dtype]
                row["ok"] = ok
                if ok:

                    def fn(runs=runs):
                        for _, run in runs:
                            run()

                    ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
                    flops = Workload(batch, HEADS, n, n, D, causal=causal).flops()
                    row.update(ms=ms, tflops=flops / ms / 1e9)
            except Exception as e:  # noqa: BLE001 - recorded, the next shape still runs
                row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:400]}")
            with out_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


def _smi() -> str:
    try:
        return subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit",
                "--format=csv",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--dtypes", default="fp16,fp8")
    parser.add_argument("--hang-s", type=int, default=45)
    parser.add_argument("--one", nargs=2, metavar=("VARIANT", "DTYPE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "probe_v3_gluon.jsonl"
    if args.one:
        _one(args.one[0], args.one[1], path)
        return 0
    meta = dict(
        kind="meta",
        date=datetime.datetime.now(datetime.UTC).isoformat(),
        gpu=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        triton=triton.__version__,
        driver=torch.version.cuda,
        smi_before=_smi(),
    )
    with path.open("a") as f:
        f.write(json.dumps(meta) + "\n")
    jobs = []
    for item in args.variants.split(","):
        variant, _, only = item.partition(":")
        jobs += [(variant, dtype) for dtype in (only or args.dtypes).split(",")]
    for variant, dtype in jobs:
        t0 = time.time()
        cmd = [
            "timeout",
            "-k",
            "5",
            str(args.hang_s),
            sys.executable,
            __file__,
            "--out",
            str(out),
            "--one",
            variant,
            dtype,
        ]
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            with path.open("a") as f:
                f.write(
                    json.dumps(
                        dict(
                            kind="subprocess",
                            variant=variant,
                            dtype=dtype,
                            rc=rc,
                            hung=rc in (124, 137),
                            s=round(time.time() - t0, 1),
                        )
                    )
                    + "\n"
                )
    with path.open("a") as f:
        f.write(json.dumps(dict(kind="meta_end", smi_after=_smi())) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
