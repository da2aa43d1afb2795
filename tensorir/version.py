"""The tiletune version (one place; setup.cfg reads it)."""
__version__ = "0.1.0"
