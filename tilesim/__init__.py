"""tilesim: predict, explain and validate attention-kernel performance on GPUs."""

from .version import __version__

__all__ = ["__version__", "predict"]


def __getattr__(name: str):
    """``tilesim.predict`` is imported on first use: ``import tilesim`` stays light."""
    if name == "predict":
        from .api import predict

        return predict
    raise AttributeError(f"module 'tilesim' has no attribute {name!r}")
