"""Publishing a release: a separate DuckDB database file holding only anonymized tables and plain-SQL views.

DuckDB has no permissions, so a view beside the raw table protects nothing: the release is its own file.  It is
written under a temporary name next to the target, verified by reopening it read-only in a fresh connection (where no
Python UDF and no source table exists), and only then renamed over the target, so a failure leaves no partial file
and an earlier release intact.  It is written in a storage version the DuckDB shell and older clients read.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
from sqlglot import exp

from . import sqlbuild as sb

# The oldest storage format that holds everything we write; DuckDB >= 1.2 (and its shell) opens it.
STORAGE_VERSION = "v1.2.0"
INFO_TABLE = "release_info"
_ALIAS = "__duckanon_release"


@dataclass(frozen=True)
class ReleaseContent:
    """What goes into the file: the anonymized table's query, views over it, and descriptive key/value rows."""

    table: str
    query: exp.Expression
    views: Mapping[str, exp.Select]
    info: Sequence[tuple[str, str]]


def _remove(path: str) -> None:
    for leftover in (path, path + ".wal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(leftover)


def write_release(con: duckdb.DuckDBPyConnection, path: str | os.PathLike, content: ReleaseContent,
                  verify: Callable[[duckdb.DuckDBPyConnection], None]) -> Path:
    """Write ``content`` to ``path`` atomically; ``verify`` gets a read-only connection to the finished file."""
    target = Path(path).resolve()
    if target.is_dir():
        raise ValueError(f"release path {str(target)!r} is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = str(target.with_name(f".{target.name}.partial-{uuid.uuid4().hex}"))
    home = con.execute("SELECT current_database()").fetchone()[0]
    attached = False
    try:
        sb.run(con, _attach(partial))
        attached = True
        sb.run(con, sb.create_table_as(sb.table(content.table, "main", _ALIAS), content.query))
        info = sb.table(INFO_TABLE, "main", _ALIAS)
        sb.run(con, exp.Create(this=exp.Schema(this=info, expressions=[
            exp.ColumnDef(this=sb.ident("key"), kind=exp.DataType.build("VARCHAR")),
            exp.ColumnDef(this=sb.ident("value"), kind=exp.DataType.build("VARCHAR"))]), kind="TABLE"))
        if content.info:
            con.executemany(sb.to_sql(exp.insert(exp.values([(exp.Placeholder(), exp.Placeholder())]), info)),
                            [list(row) for row in content.info])
        # Views must name their tables without a catalog, so they resolve in whatever name the file is opened under.
        sb.run(con, exp.Use(this=sb.ident(_ALIAS)))
        try:
            for name, view in content.views.items():
                sb.run(con, sb.create_view_as(sb.table(name), view))
        finally:
            sb.run(con, exp.Use(this=sb.ident(home)))
        sb.run(con, exp.Detach(this=sb.ident(_ALIAS)))
        attached = False
        # No replacement scans: a missing table must fail verification, not be read from a Python variable's name.
        reader = duckdb.connect(partial, read_only=True, config={"python_enable_replacements": False})
        try:
            verify(reader)
        finally:
            reader.close()
        os.replace(partial, target)
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial + ".wal")
        return target
    except BaseException:
        if attached:
            with contextlib.suppress(duckdb.Error):
                sb.run(con, exp.Use(this=sb.ident(home)))
                sb.run(con, exp.Detach(this=sb.ident(_ALIAS)))
        _remove(partial)
        raise


def _attach(path: str) -> exp.Attach:
    return exp.Attach(this=exp.alias_(sb.lit(path), _ALIAS, quoted=True), expressions=[
        exp.AttachOption(this=exp.var("STORAGE_VERSION"), expression=sb.lit(STORAGE_VERSION))])
