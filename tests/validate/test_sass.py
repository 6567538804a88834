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
