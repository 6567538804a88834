"""The GPU harness of validation: what runs on a CUDA device (timing, measurement
metadata, `validate`, `bench`, the calibration micro-benchmarks, Nsight Compute and
register runs). Everything here imports torch and Triton lazily or at module level;
the CPU library (schema, grid, report, stats, calibration derivation) is ``validate``."""
