"""duckanon's version, which releases record: the installed distribution's, or the source tree's."""

from importlib import metadata

__version__ = "0.1.0"


def version() -> str:
    try:
        return metadata.version("duckanon")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return __version__
