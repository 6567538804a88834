"""tilesim: predict, explain and validate attention-kernel performance on GPUs."""

__version__ = "0.1.0"
