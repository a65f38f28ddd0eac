"""duckanon's version, set here only: the built package takes it from this file (pyproject.toml), so the installed
distribution, ``duckanon --version`` and every release's info agree without reading package metadata at run time."""

__version__ = "0.1.0"
