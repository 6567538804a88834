"""Parsing Nsight Compute's CSV: second runs kept, a backward's forward skipped, counts checked."""

from __future__ import annotations

import csv
import io

import pytest

from tilesim.validate.gpu import ncu


def _csv(kernels: list[tuple[str, float]]) -> str:
    """An ncu --csv body: one row per (kernel, metric); time doubles as a marker."""
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i, (name, marker) in enumerate(kernels):
        w.writerow([i, f"{name}(args)", "gpu__time_duration.sum", "ns", f"{marker:,.0f}"])
        w.writerow([i, f"{name}(args)", "dram__bytes_read.sum", "byte", "1,024"])
    return "==PROF== noise\n" + out.getvalue()


def _kernels_for_cases() -> list[tuple[str, float]]:
    """What `run` launches, in order: per case (before) forward kernels, then two runs."""
    seq = [("cudaFill", 0)]  # a torch kernel: not ours, ignored
    for i, (*_, before, count) in enumerate(ncu.CASES):
        seq += [("_fwd", -1)] * before
        seq += [(f"_k{i}_{j}", 1000 * i + j) for j in range(count)]  # first run
        seq += [(f"_k{i}_{j}", 1000 * i + j + 0.5e6) for j in range(count)]  # second run
    return seq


def test_parse_keeps_second_runs_and_skips_forward_preludes():
    doc = ncu.parse(_csv(_kernels_for_cases()), ["name"], "abc1234", "2026-11-30")
    assert doc["kind"] == "ncu" and doc["metadata"]["git_commit"] == "abc1234"
    assert len(doc["cases"]) == len(ncu.CASES)
    for i, case in enumerate(doc["cases"]):
        count = ncu.CASES[i][-1]
        assert [k["kernel"] for k in case["kernels"]] == [f"_k{i}_{j}" for j in range(count)]
        # the second run's marker, in seconds
        assert [k["time_s"] for k in case["kernels"]] == pytest.approx(
            [(1000 * i + j + 0.5e6) * 1e-9 for j in range(count)]
        )
        assert all(k["dram_read_bytes"] == 1024 for k in case["kernels"])
        assert case["workload"]["pass_"] == ncu.CASES[i][7]
        assert case["config"]["block_m"] > 0


def test_parse_refuses_a_csv_the_cases_do_not_account_for():
    with pytest.raises(SystemExit, match="Triton kernels"):
        ncu.parse(_csv(_kernels_for_cases() + [("_extra", 1)]), [], "", "d")
