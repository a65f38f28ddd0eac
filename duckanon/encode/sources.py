"""What a source names, as SQL: a table, a file, a sqlglot expression, or a DataFrame of the engine's own."""

from __future__ import annotations

import os
from pathlib import Path

from sqlglot import exp

from ..declare.catalog import relation_exists
from ..engine import Engine
from ..errors import AnonymizationError
from ..sqlgen import build as sb

FILE_KINDS = {".csv": "csv", ".tsv": "tsv", ".gz": "csv", ".parquet": "parquet", ".json": "json"}


def source_relation(engine: Engine, source: str | os.PathLike | exp.Expression) -> exp.Expression:
    """What a source names, as SQL: a sqlglot expression as it is, a DataFrame of the engine's own (Spark's) as a view,
    a CSV/Parquet/JSON file path (or a folder of Parquet parts) as its reader, or a table of ``engine``; a missing file
    or table is an error naming it."""
    if isinstance(source, exp.Expression):
        return source
    native = engine.native_relation(source)
    if native is not None:
        return native
    if not isinstance(source, (str, os.PathLike)):
        raise AnonymizationError(f"a source is a table name, a file path or a sqlglot expression (on Spark also a "
                                 f"DataFrame), not a {type(source).__name__}")
    path = Path(source)
    kind = FILE_KINDS.get(path.suffix.lower())
    if kind and (isinstance(source, os.PathLike) or path.exists()):
        if not path.exists():
            raise AnonymizationError(f"no such file: {str(path)!r}")
        return engine.read_file(str(path), kind)
    relation = sb.table(str(source))
    if not relation_exists(engine, relation):
        raise AnonymizationError(f"no table named {str(source)!r}")
    return relation
