"""SASS loop bodies: counted from label to backward branch, nested loops inside their outer."""

from __future__ import annotations

from tilesim.validate.sass import loops

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/              @!P5 BRA `(.L_x_9) ;
.L_x_0:
        /*0020*/                   IMAD R2, R3, R4, RZ ;
.L_x_1:
        /*0030*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0040*/              @!PT LDS RZ, [RZ] ;
        /*0050*/                   FFMA R5, R4, R4, R5 ;
        /*0060*/               @P0 BRA `(.L_x_1) ;
        /*0070*/                   UIADD3 UR9, UR9, 0x1, URZ ;
        /*0080*/              @!UP0 BRA `(.L_x_0) ;
.L_x_9:
        /*0090*/                   EXIT ;
.L_x_2:
        /*00a0*/                   BRA `(.L_x_2);
"""


def test_loops_count_each_body_from_label_to_back_branch():
    inner, outer = loops(SASS)
    assert inner == {"instructions": 4, "ops": {"LDG": 1, "LDS": 1, "FFMA": 1, "BRA": 1}}
    # the outer body holds the inner loop's body once, and its own branch
    assert outer["instructions"] == 7
    assert outer["ops"]["BRA"] == 2 and outer["ops"]["UIADD3"] == 1 and outer["ops"]["IMAD"] == 1


def test_forward_branches_and_the_exit_spin_are_not_loops():
    assert len(loops(SASS)) == 2
    assert loops("") == []


def _hex(stall=1, wbar=7, rbar=7, wait=0):
    """The high word of an instruction's encoding with these control bits."""
    ctrl = stall | wbar << 5 | rbar << 8 | wait << 11
    return f"        /* 0x{ctrl << 41:016x} */"


# a loop body with its encodings: two reloads (scoreboard 2) waited on together after
# 3 issue cycles, a third (scoreboard 3) issued last and waited on at the top of the
# next iteration, after 2 + 4 cycles
HEX = "\n".join(
    [
        ".L_x_1:",
        "        /*0000*/                   IMAD R2, R3, R4, RZ ;",
        _hex(stall=4, wait=0b1000),
        "        /*0010*/                   LDL R5, [R1+0x8] ;",
        _hex(stall=1, wbar=2),
        "        /*0020*/                   LDL.64 R6, [R1+0x10] ;",
        _hex(stall=2, wbar=2),
        "        /*0030*/                   LDG.E R9, desc[UR4][R2.64] ;",
        _hex(stall=1, wbar=1),
        "        /*0040*/                   FADD R8, R5, R6 ;",
        _hex(stall=4, wait=0b0100),
        "        /*0050*/                   LDL R10, [R1+0x18] ;",
        _hex(stall=2, wbar=3),
        "        /*0060*/               @P0 BRA `(.L_x_1) ;",
        _hex(stall=4),
    ]
)


def test_spill_reload_waits_from_the_control_bits():
    (loop,) = loops(HEX)
    assert loop["instructions"] == 7 and loop["ops"]["LDL"] == 3
    # in body order: the wait on scoreboard 3 at the top, after the last reload's own 2
    # issue cycles and the branch's 4 (the iteration before); the wait on scoreboard 2
    # after LDL.64 (2) and LDG (1)
    assert loop["spill_reload_waits"] == [6, 3]


def test_text_without_encodings_has_no_spill_figure():
    inner, _ = loops(SASS)
    assert "spill_reload_waits" not in inner


def test_a_loop_that_loads_nothing_through_l1_reloads_from_l1():
    """Its tiles by cp.async.cg (LDGSTS.E.BYPASS): the spilled lines stay in L1, and
    its reloads cost what the issue replay charges, no wait here."""
    bypass = HEX.replace("LDG.E R9, desc[UR4][R2.64]", "LDGSTS.E.BYPASS.128 [R9], desc[UR4][R2.64]")
    (loop,) = loops(bypass)
    assert loop["ops"]["LDL"] == 3 and "LDG" not in loop["ops"]
    assert loop["spill_reload_waits"] == []
