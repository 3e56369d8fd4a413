"""The package version (one place; the package root and model files read it)."""
__version__ = "0.1.0"
