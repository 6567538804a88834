"""CLI commands, one module per area; each has ``register(app)``.

To add a module, import it here and append it to COMMAND_MODULES.
"""

from . import explain, gpu, hw, predict, report, trace

COMMAND_MODULES: list = [hw, trace, gpu, report, explain, predict]
