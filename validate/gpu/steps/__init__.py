"""The `tilesim calibrate` steps: one module per micro-benchmark the preset is fitted to.

Each step is a plain function of a :class:`tilesim.validate.gpu.microbench.Bench` (the
GPU's sizes, the clock sampler, the quick flag, the log) that times its kernels and adds
one calibration row per figure (:func:`tilesim.validate.schema.measurement`); the
kernels only it uses live beside it. :func:`tilesim.validate.gpu.calibrate.run_calibration`
runs them in the order of :data:`tilesim.validate.calibrate.STEPS`, and
:func:`tilesim.validate.calibrate.derive_preset` turns their rows into preset fields.
"""
