"""CLI commands, one module per command (or group of subcommands); each has ``register(app)``.

To add a module, import it here and append it to COMMAND_MODULES.
"""

from . import (
    bench,
    calibrate,
    compare,
    explain,
    gantt,
    hw,
    predict,
    report,
    roofline,
    trace,
    validate,
    whatif,
)

COMMAND_MODULES: list = [
    *(hw, trace, calibrate, bench, validate, report),
    *(explain, roofline, gantt, whatif, predict, compare),
]
