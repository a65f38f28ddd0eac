"""Releasing: writing, verifying and reading release files (DuckDB, Parquet, CSV)."""

from .files import (
    ReleaseContent,
    ReleaseInfo,
    read_release_info,
    release_format,
    write_release,
)

__all__ = ["ReleaseContent", "ReleaseInfo", "read_release_info", "release_format", "write_release"]
