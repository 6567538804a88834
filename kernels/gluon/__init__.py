"""FlashAttention-3's forward written in Gluon: a TMA producer warp, two consumer
warpgroups and wgmma, one CTA per Q tile or persistent (``forward`` describes the
schedule; ``tile`` holds the per-tile consumer and the one guarded Gluon import,
``persistent`` and ``one_tile`` the two grids' bodies)."""

from .forward import AVAILABLE, Forward, check_config, launches

__all__ = ["AVAILABLE", "Forward", "check_config", "launches"]
