"""The SASS issue replay: control bits, scoreboards, warps sharing a scheduler."""

from __future__ import annotations

import pytest

from tilesim.validate.issue import kernel_issue, parse, replay


def _line(addr: int, text: str, stall=1, wbar=7, rbar=7, wait=0) -> str:
    ctrl = stall | wbar << 5 | rbar << 8 | wait << 11
    instr = f"        /*{addr:04x}*/   {text} ;  /* 0x0000000000000000 */"
    return f"{instr}\n        /* 0x{ctrl << 41:016x} */"


def _kernel(body_lines: list[tuple]) -> str:
    """A kernel: one HGMMA, then a loop over ``body_lines`` ((text, controls) each)."""
    lines = [_line(0, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24"), ".L_x_0:"]
    addr = 0x10
    for text, ctrl in body_lines:
        lines.append(_line(addr, text, **ctrl))
        addr += 0x10
    lines.append(_line(addr, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24"))
    lines.append(_line(addr + 0x10, "@P0 BRA `(.L_x_0)", stall=5))
    lines.append(_line(addr + 0x20, "EXIT"))
    return "\n".join(lines)


def test_parse_reads_the_control_bits():
    (ins,), labels = parse(_line(0, "FADD R1, R2, R3", stall=4, wbar=2, rbar=3, wait=0b101))
    assert ins[1:] == ("FADD", 4, 2, 3, 0b101) and labels == {}


def test_one_warp_issues_by_its_stall_counts():
    # 3 FADDs stalling 4 each, the HGMMA 1 and the branch 5: 18 cycles a pass
    body = [("FADD R1, R1, R2", {"stall": 4})] * 3
    out = kernel_issue(_kernel(body), warps=4)
    assert out["loop"][0] == pytest.approx(18)
    assert out["loop_instructions"] == 5


def test_a_scoreboard_wait_costs_the_latency_left():
    # MUFU (17 cycles) sets scoreboard 0; the FADD right after waits for it
    body = [("MUFU.EX2 R1, R2", {"stall": 1, "wbar": 0}), ("FADD R3, R1, R1", {"wait": 0b1})]
    no_wait = [("MUFU.EX2 R1, R2", {"stall": 1, "wbar": 0}), ("FADD R3, R1, R1", {})]
    slow = kernel_issue(_kernel(body), warps=4)["loop"][0]
    fast = kernel_issue(_kernel(no_wait), warps=4)["loop"][0]
    assert slow - fast == pytest.approx(17 - 1)


def test_warps_fill_each_others_stalls_until_the_issue_port_is_full():
    # 10 independent FADDs stalling 4: one warp 40+ cycles a pass; four warps share one
    # issue slot per cycle and the FP32 lanes' 1.05-cycle interval, so about 4 x 10 x 1.05
    body = [("FADD R1, R1, R2", {"stall": 4})] * 10
    one, two, _, four = kernel_issue(_kernel(body), warps=4)["loop"]
    assert two == pytest.approx(one, rel=0.1)  # the second warp hides in the stalls
    assert four > 2 * 10 * 1.05 and four < 2 * one


def test_a_kernel_without_mma_has_no_entry_and_one_without_a_loop_is_replayed_once():
    assert kernel_issue(_line(0, "FADD R1, R1, R2") + "\n" + _line(0x10, "EXIT"), 4) is None
    hgmma = _line(0, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24")
    text = "\n".join([hgmma, _line(0x10, "FADD R1, R1, R2", stall=6), _line(0x20, "EXIT")])
    out = kernel_issue(text, 4)
    assert "loop" not in out and out["kernel"][0] == pytest.approx(1 + 6 + 1)


def test_the_barrier_waits_for_every_warp():
    body = [("BAR.SYNC.DEFER_BLOCKING 0x0", {})]
    one = replay(parse(_kernel(body))[0][1:-1], 1, 3, bar=20)
    assert one == pytest.approx(1 + 20 + 5)  # HGMMA, barrier, branch


def _text(rows: list) -> str:
    """Lines of SASS from (text, controls) rows and label strings, 0x10 apart."""
    out, addr = [], 0
    for row in rows:
        if isinstance(row, str):
            out.append(row)
        else:
            out.append(_line(addr, row[0], **row[1]))
            addr += 0x10
    return "\n".join(out)


def test_a_warp_specialised_kernel_replays_the_partition_that_runs_its_loop():
    # a load partition (8 FADDs, outside) and the MMA partition: 2 FADDs of prologue,
    # the loop, 1 FADD of epilogue. The mbarrier retry stub after EXIT jumps back into
    # the loop: it closes no loop, though its span would be shorter than the loop's
    fadd = ("FADD R1, R1, R2", {"stall": 2})
    text = _text(
        [
            ("USETMAXREG.DEALLOC.CTAPOOL 0x18", {}),
            *[fadd] * 8,
            ("USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0", {}),
            *[fadd] * 2,
            ".L_x_0:",
            *[fadd] * 20,
            ".L_x_1:",
            ("QGMMA.64x64x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24", {}),
            fadd,
            ("@P0 BRA `(.L_x_0)", {}),
            fadd,
            ("USETMAXREG.DEALLOC.CTAPOOL 0x18", {}),
            ("EXIT", {}),
            ("BRA `(.L_x_1)", {}),
        ]
    )
    out = kernel_issue(text, 4)
    assert out["loop_instructions"] == 23  # 20 FADDs, the QGMMA (fp8 wgmma), a FADD, BRA
    assert out["rest_instructions"] == 3  # the MMA partition's other FADDs


def test_masked_blocks_run_once_per_cta():
    # the loop's branch skips a 5-FADD block (the Gluon kernel's diagonal mask)
    fadd = ("FADD R1, R1, R2", {"stall": 4})
    text = _text(
        [
            ".L_x_0:",
            ("HGMMA.64x64x16.F32 R24, gdesc[UR4], R24", {}),
            ("@!P1 BRA `(.L_x_1)", {}),
            *[fadd] * 5,
            ".L_x_1:",
            fadd,
            ("@P0 BRA `(.L_x_0)", {}),
            ("EXIT", {}),
        ]
    )
    every = kernel_issue(text, 4)
    once = kernel_issue(text, 4, masked_blocks=True)
    assert every["loop_instructions"] == 9 and every["rest_instructions"] == 1
    assert once["loop_instructions"] == 4 and once["rest_instructions"] == 6
    assert every["loop"][0] - once["loop"][0] == pytest.approx(5 * 4)


def test_the_other_mma_loop_is_not_the_rest():
    # v2's forward: an unmasked K/V loop and a masked one (which a full-attention kernel
    # never enters); both are steps of the K/V walk that the loop's cycles charge, so
    # the rest is the prologue's 2 FADDs and the epilogue's 3
    fadd = ("FADD R1, R1, R2", {"stall": 2})
    hgmma = ("HGMMA.64x64x16.F32 R24, gdesc[UR4], R24", {})
    text = _text(
        [
            *[fadd] * 2,
            ".L_x_0:",
            hgmma,
            *[fadd] * 4,
            ("@P0 BRA `(.L_x_0)", {}),
            ".L_x_1:",
            hgmma,
            *[fadd] * 9,
            ("@P1 BRA `(.L_x_1)", {}),
            *[fadd] * 3,
            ("EXIT", {}),
        ]
    )
    out = kernel_issue(text, 4)
    assert out["loop_instructions"] == 6  # the shorter loop: HGMMA, 4 FADDs, BRA
    assert out["rest_instructions"] == 2 + 3 + 1  # and EXIT
    # a causal kernel enters the masked loop once per CTA (the diagonal block): the rest
    # adds what that pass issues beyond a pass of the loop (5 more FADDs, 2 cycles each)
    causal = kernel_issue(text, 4, diagonal=1)
    assert causal["loop"] == out["loop"]
    assert causal["rest"][0] == pytest.approx(out["rest"][0] + 5 * 2)
