"""GPU descriptions: one TOML preset per GPU and the frozen `GPU` they load into.

>>> from tilesim.hwmodels import load_gpu
>>> gpu = load_gpu("h100")                      # alias, preset name or .toml path
>>> fast = gpu.with_overrides({"hbm_bandwidth_Bps": "2x"})
>>> fast.name
'h100_sxm5_80gb.transferred+hbm_bandwidth_Bps=2x'
"""

from .describe import derived_figures
from .fields import FIELDS, FLAG_FIELDS, NUMERIC_FIELDS, SETTABLE_FIELDS
from .gpu import DTYPE_BYTES, GPU, MMA_PATHS
from .overrides import apply_overrides, parse_set_options
from .presets import (
    ALIASES,
    PRESETS_DIR,
    list_presets,
    load_gpu,
    parse_preset,
    preset_path,
    render_preset,
    write_preset,
)
from .schema import UNITS, format_number

__all__ = [
    "ALIASES",
    "DTYPE_BYTES",
    "FIELDS",
    "FLAG_FIELDS",
    "GPU",
    "MMA_PATHS",
    "NUMERIC_FIELDS",
    "PRESETS_DIR",
    "SETTABLE_FIELDS",
    "UNITS",
    "apply_overrides",
    "derived_figures",
    "format_number",
    "list_presets",
    "load_gpu",
    "parse_preset",
    "parse_set_options",
    "preset_path",
    "render_preset",
    "write_preset",
]
