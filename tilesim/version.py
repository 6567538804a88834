"""tilesim's version: one module of its own, so that any module can read it without
importing the package's lazy top level."""

__version__ = "0.1.0"
