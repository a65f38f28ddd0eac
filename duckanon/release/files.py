"""Publishing a release: a separate file holding only the anonymized table, described by its ``release_info``.

DuckDB has no permissions, so a view beside the raw table protects nothing: the release is its own file.  Three
formats: a DuckDB database (the default; the table, plain-SQL views over it and a ``release_info`` table), Parquet
(the table; ``release_info`` as the file's key/value metadata) and CSV (the table with a header; ``release_info`` in a
JSON file beside it, ``<name>.release_info.json``, holding the CSV's SHA-256).  The format follows the extension
(``.duckdb``/``.db``/``.ddb``, ``.parquet``, ``.csv``) or ``format=``; any other extension is an error.  Parquet is a
folder where one file cannot hold the release: written on Spark (a folder of parts), and a release of several tables
(a file per table); the folder's ``_release_info.json`` holds the info.

Every format is written the same way: under a temporary name next to the target, verified by reading it back in a
fresh connection (where no Python UDF, replacement scan or source table exists), and only then renamed over the
target, so a failure leaves no partial file and an earlier release intact.  A target that is the source, or any
database the connection has attached, is refused before anything is written; so is a release another process has
open for writing.  A stale write-ahead log of an earlier release (left by a process killed while it had that file open
read-write) is removed before the rename, so the verified file is what every later reader sees.  Hidden partial files
of killed publishes are removed by the next publish to the same target.  DuckDB files are written in a storage version
the DuckDB shell and older clients read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import re
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
from sqlglot import exp

from .._version import __version__
from ..engine import DuckDBEngine, Engine
from ..engine.duckdb_engine import MERGES_EQUAL_VALUES, parquet_options
from ..errors import AnonymizationError, DigestMismatch, NotARelease, ReleaseCheckFailed
from ..privacy.people import signature_group_histogram
from ..risk.counting import compatible_histogram
from ..risk.population import ClassSizes, compatible_prosecutor_risk, prosecutor_risk
from ..sqlgen import build as sb
from .digest import Digested, content_digest, digested, equal_values_written_alike, fingerprint
from .signing import SIGNATURE, SIGNING_KEY, Signer

# The oldest storage format that holds everything we write; DuckDB >= 1.2 (and its shell) opens it.
STORAGE_VERSION = "v1.2.0"
INFO_TABLE = "release_info"
INFO_SUFFIX = ".release_info.json"
FOLDER_INFO = "_release_info.json"
TABLES = "tables"  # a folder release's layout of one file per source table, in its FOLDER_INFO
EXTENSIONS = {".duckdb": "duckdb", ".db": "duckdb", ".ddb": "duckdb", ".parquet": "parquet", ".csv": "csv"}
# A publish's own files, named with its process id: partial files (and a CSV's bridge, a DuckDB file's staged rows, a
# Spark release's new link) and Spark release folders.
_PARTIAL = re.compile(r"\.(?:partial|release)-(\d+)-[0-9a-f]{32}(?:\.bridge|\.link|\.rows)?$")

# release_info's columns and types: one row per release.  ``created`` is in UTC (a plain TIMESTAMP: reading a
# TIMESTAMPTZ into Python needs pytz, which BI tools' drivers may lack).
INFO_COLUMNS = {
    "tool": "VARCHAR", "tool_version": "VARCHAR", "created": "TIMESTAMP", "kind": "VARCHAR",
    "released_table": "VARCHAR", "source_records": "BIGINT", "released_records": "BIGINT",
    "suppressed_records": "BIGINT", "suppression": "VARCHAR", "classes": "BIGINT", "smallest_class": "BIGINT",
    "highest_risk": "DOUBLE", "average_risk": "DOUBLE", "policy": "VARCHAR", "transformation": "VARCHAR",
    "metrics": "VARCHAR", "content_digest": "VARCHAR", "signing_key": "VARCHAR", "signature": "VARCHAR",
}
_JSON_COLUMNS = ("policy", "transformation", "metrics")


@dataclass(frozen=True)
class ReleaseInfo:
    """What the caller knows of a release; :func:`write_release` adds the tool, the time and what it measures on the
    released rows (their number, and the classes of ``classes_by`` with the prosecutor risk: of a record, or under a
    policy that counts people by column ``person``, of a person, 1 / the people sharing their signature).  Never a
    random seed: with it the noise of a perturbation or the choices of a clustering could be regenerated."""

    kind: str  # generalization, partitioning, clustering or perturbation
    source_records: int | None  # None (NULL): withheld, as a differentially private release withholds it
    suppressed_records: int | None = 0
    suppression: str | None = None
    policy: Mapping | None = None
    transformation: Mapping | None = None
    metrics: Mapping[str, object] = field(default_factory=dict)
    classes_by: Sequence[str] = ()  # the quasi-identifiers whose equal values form the released classes
    strata: Sequence[str] = ()  # the columns within each of whose values the classes are formed
    person: str | None = None  # under a policy that counts people, the risk is a person's (of their signature)
    # A missing value matches any (cell suppression): classes, the smallest and the risk count compatible records.
    missing_matches_any: bool = False

    def __post_init__(self):
        described = json.dumps([self.policy, self.transformation, self.metrics], default=str).lower()
        if re.search(r'"(random_)?seed"', described):
            raise AnonymizationError("release_info must not hold a random seed (it would let anyone regenerate the "
                                     "noise or the choices): remove it from the description")


@dataclass(frozen=True)
class ReleaseContent:
    """What goes into the file: the anonymized table's query, views over it (DuckDB format only), and its info."""

    table: str
    query: exp.Expression
    views: Mapping[str, exp.Select]
    info: ReleaseInfo
    # Relations read to make the release: a target that is one of their files is refused.
    sources: Sequence[exp.Expression] = ()
    # A release of several tables: each source table's released columns, and the column naming each row's table.
    parts: Mapping[str, Sequence[str]] = field(default_factory=dict)
    record_table: str | None = None
    # A column of the query giving how many records each of its rows stands for (rows equal in their text, grouped:
    # checking and digesting them costs one row per group); None when each row is one record.
    weight: str | None = None

    def __post_init__(self):
        checked_table_name(self.table)
        for view in self.views:
            if view in (self.table, INFO_TABLE):
                raise AnonymizationError(f"the release's view {view!r} would take the name of its table or of "
                                         f"{INFO_TABLE}: name the table otherwise")
        if self.parts and self.record_table is None:
            raise AnonymizationError("a release of several tables names the column that holds each row's table")
        own = {name.lower() for name in (self.table, INFO_TABLE, *self.views)}
        for name in self.parts:
            if name.lower() in own:
                raise AnonymizationError(f"the release's table {name!r} would take the name of its table, a view or "
                                         f"{INFO_TABLE}: name the table otherwise")

    def rows(self, engine: Engine) -> exp.Query:
        """The released rows, one per record."""
        return self.query if self.weight is None else repeated(engine, self.query, self.weight)

    def part(self, name: str, relation: exp.Expression | None = None) -> exp.Select:
        """Table ``name`` of a release of several tables: its rows of ``relation`` (the released table by default),
        its released columns in its own order."""
        rows = sb.table(self.table) if relation is None else relation
        return exp.select(*[sb.col(c) for c in self.parts[name]]).from_(rows).where(
            sb.col(self.record_table).eq(sb.lit(name)))


def repeated(engine: Engine, query: exp.Query, weight: str) -> exp.Select:
    """``query``'s rows but ``weight``, each as many times as its ``weight`` says."""
    columns = [c for c in engine.columns(query.subquery()) if c != weight]
    series = exp.Unnest(expressions=[exp.GenerateSeries(start=sb.lit(1), end=sb.col(weight, "weighed"))],
                        alias=exp.TableAlias(this=sb.ident("copies"), columns=[sb.ident("copy")]))
    return exp.select(*[sb.col(c, "weighed") for c in columns]).from_(query.subquery("weighed")).join(
        series, join_type="CROSS")


def checked_table_name(table: str) -> str:
    """The name of a release's table, refused when it cannot be one: empty, or the name of the release's info."""
    if not isinstance(table, str) or not table.strip():
        raise AnonymizationError(f"release table name {table!r}: give a non-empty name")
    if table.lower() == INFO_TABLE:
        raise AnonymizationError(f"release table name {table!r} is the name of the release's own {INFO_TABLE} "
                                 f"table: choose another")
    return table


def release_format(path: str | os.PathLike, format: str | None = None, engine: Engine | None = None) -> str:
    """The format a release at ``path`` is written in: ``format`` when given, else the one its extension names; one
    ``engine`` (when given) writes.  On Spark a release is Parquet, a folder of part files."""
    if Path(path).is_dir() and not _is_release_folder(Path(path)):
        raise AnonymizationError(f"release path {str(path)!r} is a directory: name a file in it")
    existing_folder(Path(path))
    suffix = Path(path).suffix.lower()
    named = EXTENSIONS.get(suffix)
    if format is None:
        if named is None:
            raise AnonymizationError(
                f"release path {str(path)!r}: unknown extension {suffix or '(none)'!r}; use one of "
                f"{', '.join(EXTENSIONS)} or give format= ({', '.join(FORMATS)})")
        format = named
    if format not in _WRITERS:
        raise AnonymizationError(f"unknown release format {format!r}; known: {', '.join(_WRITERS)}")
    if named is not None and named != format:
        raise AnonymizationError(f"release path {str(path)!r} has the extension of a {named} file, but format="
                                 f"{format!r}: make them agree")
    if engine is not None and format not in _engine_writers(engine):
        raise AnonymizationError(f"on {engine.dialect}, a release is written as {' or '.join(_engine_writers(engine))} "
                                 f"(a {format} release is written from DuckDB): name a .parquet path")
    return format


def _engine_writers(engine: Engine) -> dict[str, _Writer]:
    return _WRITERS if engine.dialect == "duckdb" else {"parquet": _FOLDER}


def write_release(engine: Engine, path: str | os.PathLike, content: ReleaseContent,
                  verify: Callable[[Engine], None], *, format: str | None = None, signer: Signer | None = None,
                  announce: Callable[[str], None] | None = None) -> Path:
    """Write ``content`` to ``path`` atomically; ``verify`` gets a fresh connection in which ``content.table`` reads
    the finished file (and ``release_info`` its info), and raises if anything is wrong.  The info records the rows'
    content digest (:mod:`.digest`), taken once as they are written, and, with ``signer``, a signature over itself
    (:mod:`.signing`); the file read back must hold the rows digested (:func:`_holds`).  ``announce`` hears when the
    writing ends and the verification starts."""
    writer = _engine_writers(engine)[release_format(path, format, engine)]
    if content.parts and writer in (_WRITERS["parquet"], _FOLDER):
        writer = _TABLES_FOLDER
    target = _checked_target(engine, path, content.sources)
    _remove_stale_partials(target)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        written: list[Digested] = []

        def seal(rows_engine: DuckDBEngine, rows: exp.Expression, weight: str | None = None) -> dict:
            written.append(digested(rows_engine, rows, _counted_classes(content.info), weight))
            return _sealed(_info_row(rows_engine, rows, content, written[-1]), written[-1].digest, signer)

        row = writer.write(engine, partial, content, seal)
        if announce is not None:
            announce(f"verifying the written {target.name}")
        reader = writer.reader(partial, content.table)
        try:
            _verify_info(reader, row)
            if not _holds(reader, sb.table(content.table), written[-1]):
                raise ReleaseCheckFailed("release check: the rows read back from the file are not the rows written "
                                         "(another content digest)")
            verify(reader)
        finally:
            reader.close()
        _refuse_if_open_for_writing(target)
        writer.replace(partial, target)
        _sync_directory(target.parent)
        return target
    except BaseException:
        writer.remove(partial)
        raise


def _holds(reader: DuckDBEngine, table: exp.Table, written: Digested) -> bool:
    """Whether ``table`` read back holds the rows digested: their fingerprint where it reads back at the types they
    were digested at, else their digest recomputed."""
    if tuple(reader.types(table).values()) == written.types:
        return fingerprint(reader, table) == written.fingerprint
    return content_digest(reader, table) == written.digest


def read_release_info(path: str | os.PathLike, format: str | None = None) -> dict:
    """A release's info as a dict (JSON columns decoded), whatever its format; a file whose released table is gone
    or unreadable is refused, as :func:`open_release` refuses it."""
    reader, info = open_release(path, format)
    reader.close()
    return info


def open_release(path: str | os.PathLike, format: str | None = None) -> tuple[DuckDBEngine, dict]:
    """A read-only connection in which the release at ``path`` reads as its table (under its own name) and
    ``release_info``, and its info decoded; a file that is not a release, or lacks its info, is an error saying so."""
    path = Path(path)
    if not path.is_file() and not _is_release_folder(path):
        raise AnonymizationError(f"{str(path)!r} is not a file: name a release written by duckanon")
    writer = _reading_writer(path, format)
    info = _described(writer, path, None)
    reader = _readable(writer, path, info["released_table"])
    try:
        columns = reader.columns(sb.table(info["released_table"]))
    except duckdb.Error as error:
        reader.close()
        raise NotARelease(f"{str(path)!r}: its table {info['released_table']!r} cannot be read") from error
    if not columns:
        reader.close()
        raise NotARelease(f"{str(path)!r}: its table {info['released_table']!r} has no columns")
    return reader, info


def _reading_writer(path: Path, format: str | None) -> _Writer:
    """What reads the release at ``path``: a folder (Parquet parts written on Spark, or a file per table of a
    release of several tables), or a file by its format."""
    if _is_release_folder(path):
        return _FOLDER
    if format is None and path.suffix.lower() not in EXTENSIONS:
        raise NotARelease(f"{str(path)!r} is not a release: duckanon writes {', '.join(EXTENSIONS)} files and Spark "
                          f"release folders (give format= if it was renamed)")
    return _WRITERS[release_format(path, format)]


def _is_release_folder(path: Path) -> bool:
    return path.is_dir() and (path / FOLDER_INFO).is_file()


def _readable(writer: _Writer, path: Path, table: str | None) -> DuckDBEngine:
    try:
        return writer.reader(path, table)
    except DigestMismatch:
        raise
    except (duckdb.Error, OSError, ValueError, KeyError) as error:
        raise NotARelease(f"{str(path)!r} is not a release duckanon can read: "
                                 f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from error


def _described(writer: _Writer, path: Path, table: str | None) -> dict:
    reader = _readable(writer, path, table)
    try:
        info = _decoded(reader)
    except (duckdb.Error, json.JSONDecodeError) as error:
        raise NotARelease(f"{str(path)!r} has no readable {INFO_TABLE}: it is not a release written by "
                                 f"duckanon, or its info was removed") from error
    finally:
        reader.close()
    if info.get("tool") != "duckanon" or not info.get("released_table"):
        raise NotARelease(f"{str(path)!r}: its {INFO_TABLE} does not describe a duckanon release")
    return info


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write(temporary)`` beside ``path``, then rename it over ``path``: no partial file, an earlier one intact on
    failure."""
    write_together({path: write})


def write_together(writes: Mapping[Path, Callable[[Path], None]]) -> None:
    """Each ``write(temporary)`` beside its path; only once all succeeded, each renamed over its path.  A failure
    leaves no partial file and every earlier file intact."""
    partials = {}
    for path in writes:
        if path.is_dir():
            raise AnonymizationError(f"{str(path)!r} is a directory: name a file in it")
        existing_folder(path)
        partials[path] = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex}")
    try:
        for path, write in writes.items():
            write(partials[path])
        for path, partial in partials.items():
            os.replace(partial, path)
    finally:
        for partial in partials.values():
            partial.unlink(missing_ok=True)


def existing_folder(path: Path) -> None:
    """Refuse a path whose folder does not exist: a typo in a folder's name would otherwise create it silently."""
    if not path.parent.is_dir():
        raise AnonymizationError(f"the folder of {str(path)!r} does not exist: create it first, or name another path")


# ---------------------------------------------------------------------------- the target
def _checked_target(engine: Engine, path: str | os.PathLike, sources: Iterable[exp.Expression]
                    ) -> Path:
    if "\\" in str(path):
        # DuckDB reads a backslash as a path separator: the file would land at another path than the one named.
        raise AnonymizationError(f"release path {str(path)!r} holds a backslash, which DuckDB reads as a directory "
                                 f"separator: choose a name without one")
    # The path itself, not what a link there points to: a Spark release's path is a link that a new release swaps.
    target = Path(path).absolute().parent.resolve() / Path(path).name
    protected = engine.protected_paths(sources)
    for protected_path, what in protected.items():
        protected_path = Path(protected_path).resolve()
        if target.resolve() in (protected_path, protected_path.with_name(protected_path.name + ".wal")):
            raise AnonymizationError(f"release path {str(path)!r} is the {what}: publishing there would destroy "
                                     f"it; choose another file")
    existing_folder(target)
    return target


def _remove_stale_partials(target: Path) -> None:
    """Partial files of publishes to this target whose process is gone (killed before it could clean up), and
    release folders (of Spark releases) that the path no longer links to."""
    prefixes = (f".{target.name}.partial-", f".{target.name}.release-")
    current = target.resolve() if target.is_symlink() else None
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(target.parent):
            name = entry.name.removesuffix(".wal").removesuffix(INFO_SUFFIX)
            found = _PARTIAL.search(name)
            if (not name.startswith(prefixes) or not found or _alive(int(found.group(1)))
                    or Path(entry.path).resolve() == current):
                continue
            _remove_files(Path(entry.path))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _refuse_if_open_for_writing(target: Path) -> None:
    """A process with the earlier release open read-write would keep writing a log that DuckDB replays into the new
    file on its next open; readers are fine (they keep reading the file they opened).  Linux lists file locks in
    /proc/locks; DuckDB holds a write lock on a database it has open read-write."""
    try:
        status = target.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return
    where = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    for line in locks.splitlines():
        fields = line.split()
        if len(fields) >= 6 and "WRITE" in fields and where in fields:
            raise AnonymizationError(f"{str(target)!r} is open for writing in another process (pid "
                                     f"{fields[fields.index('WRITE') + 1]}): close it before publishing over it")


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def _remove_files(*paths: Path) -> None:
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.remove(path)


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


# ---------------------------------------------------------------------------- the info
def _counted_classes(info: ReleaseInfo) -> list[str] | None:
    """The columns whose classes the digest of the released rows counts for the info: none where the info counts
    them otherwise (a missing value matching any value) or has none."""
    return [*info.strata, *info.classes_by] if info.classes_by and not info.missing_matches_any else None


def _info_row(engine: DuckDBEngine, released: exp.Expression, content: ReleaseContent, rows: Digested) -> dict:
    """release_info's row: the caller's facts, and the ``released`` rows' count, classes and prosecutor risk, as
    ``rows`` (their digest) counted them."""
    info = content.info
    released_records, highest, average, classes, smallest = rows.fingerprint[0], None, None, None, None
    if info.classes_by and info.missing_matches_any:
        sizes, records, combinations = compatible_histogram(engine, released, info.classes_by, info.strata)
        if combinations:
            prosecutor = compatible_prosecutor_risk(sizes, records, 1.0)
            classes, smallest = combinations, int(sizes[0])
            highest, average = prosecutor.highest, prosecutor.average
    elif info.classes_by:
        sample = ClassSizes(*rows.class_sizes)
        if sample.classes:
            prosecutor = prosecutor_risk(sample if info.person is None else ClassSizes(*signature_group_histogram(
                engine, released, info.classes_by, info.person, content.record_table)), 1.0)
            classes, smallest = sample.classes, int(sample.sizes[0])
            highest, average = prosecutor.highest, prosecutor.average
    return {
        "tool": "duckanon", "tool_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0, tzinfo=None), "kind": info.kind,
        "released_table": content.table, "source_records": _count_or_null(info.source_records),
        "released_records": int(released_records), "suppressed_records": _count_or_null(info.suppressed_records),
        "suppression": info.suppression, "classes": classes, "smallest_class": smallest,
        "highest_risk": highest, "average_risk": average,
        "policy": _json(info.policy), "transformation": _json(info.transformation), "metrics": _json(info.metrics),
    }


def _count_or_null(count: int | None) -> int | None:
    return None if count is None else int(count)


def _sealed(row: dict, digest: str, signer: Signer | None) -> dict:
    """``row`` completed with the content digest and, with ``signer``, the key's fingerprint and the signature (over
    the info as a reader decodes it)."""
    sealed = {**row, "content_digest": digest, SIGNING_KEY: None, SIGNATURE: None}
    if signer is not None:
        sealed[SIGNING_KEY] = signer.key_id
        sealed[SIGNATURE] = signer.sign(decoded_info(sealed))
    return sealed


def decoded_info(row: Mapping[str, object]) -> dict:
    """An info row as readers see it: JSON columns decoded, numbers as plain Python numbers."""
    return {c: json.loads(v) if c in _JSON_COLUMNS and isinstance(v, str) else v.item() if hasattr(v, "item") else v
            for c, v in row.items()}


def _json(value: object) -> str | None:
    if value is None:
        return None
    return json.dumps(_finite(value), default=_plain, allow_nan=False, sort_keys=True)


def _finite(value: object) -> object:
    """``value`` with Python's NaN and infinities as text, as :func:`_plain` gives NumPy's (json asks ``default``
    only about what it cannot write, never about a float)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _plain(value: object) -> object:
    """NumPy scalars and other number-likes as plain numbers; NaN and infinities as text JSON can hold."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


def _decoded(reader: DuckDBEngine) -> dict:
    info = sb.table(INFO_TABLE)
    rows = reader.rows(exp.select(exp.Star()).from_(info))
    if len(rows) != 1:
        raise ReleaseCheckFailed(f"release check: {INFO_TABLE} holds {len(rows)} rows, one expected")
    row = dict(zip(reader.columns(info), rows[0]))
    for column in _JSON_COLUMNS:
        if row.get(column) is not None:
            row[column] = json.loads(row[column])
    return row


def _verify_info(reader: DuckDBEngine, row: dict) -> None:
    written = _decoded(reader)
    expected = {c: json.loads(v) if c in _JSON_COLUMNS and v is not None else v for c, v in row.items()}
    if list(written) != list(INFO_COLUMNS):
        raise ReleaseCheckFailed(f"release check: {INFO_TABLE} has columns {list(written)}, expected "
                                 f"{list(INFO_COLUMNS)}")
    differing = [c for c in INFO_COLUMNS if _normal(written[c]) != _normal(expected[c])]
    if differing:
        raise ReleaseCheckFailed(f"release check: {INFO_TABLE} differs from what was written in {differing}")


def _normal(value: object) -> object:
    if isinstance(value, float):
        return round(value, 12)
    return value


def _info_select(row: dict) -> exp.Select:
    """The info row as a one-row query of typed literals (for formats that store it as a table)."""
    return exp.select(*[exp.cast(sb.lit(_text(row[c])), exp.DataType.build(t)).as_(c, quoted=True)
                        for c, t in INFO_COLUMNS.items()])


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value) if not isinstance(value, float) else repr(value)


# ---------------------------------------------------------------------------- the formats
class _Writer(ABC):
    """One file format: how a release is written, read back, and moved into place."""

    @abstractmethod
    def write(self, engine: Engine, partial: Path, content: ReleaseContent,
              seal: Callable[..., dict]) -> dict:
        """Write ``content`` to ``partial``; ``seal(duckdb, rows[, weight])`` digests the rows as they are written,
        read in DuckDB (each standing for ``weight`` records where a column is named), counts their classes, and
        gives the info row.  Returns that row."""

    @abstractmethod
    def reader(self, path: Path, table: str | None) -> DuckDBEngine:
        """A fresh connection where ``table`` (when given) reads the file's table and ``release_info`` its info."""

    def companions(self, path: Path) -> list[Path]:
        """Files that belong to a release at ``path`` besides itself."""
        return []

    def replace(self, partial: Path, target: Path) -> None:
        for companion, final in zip(self.companions(partial), self.companions(target)):
            os.replace(companion, final)
        os.replace(partial, target)

    def remove(self, partial: Path) -> None:
        _remove_files(partial, *self.companions(partial))


def _fresh_reader(path: Path | None = None, *, writable: bool = False, settings: Mapping[str, str] | None = None
                  ) -> DuckDBEngine:
    """A connection of its own, over ``path`` or in memory.  No replacement scans: a missing table must fail
    verification, not be read from a Python variable's name.  ``writable`` creates the file, in the storage format
    every DuckDB we support opens, with ``settings``."""
    config = {"python_enable_replacements": False}
    if path is None:
        return DuckDBEngine(duckdb.connect(config=config))
    if writable:
        config.update(storage_compatibility_version=STORAGE_VERSION, **(settings or {}))
    return DuckDBEngine(duckdb.connect(str(path), read_only=not writable, config=config))


# Parquet holds these only approximately (HUGEINT as DOUBLE, TIME WITH TIME ZONE moved to UTC); their text is exact.
_INEXACT_IN_PARQUET = ("HUGEINT", "TIME WITH TIME ZONE")
# Parquet's widest exact number: every 128-bit integer of up to 38 digits.
_WIDEST_DECIMAL = "DECIMAL(38, 0)"


def _exact_in_parquet(column_type: str) -> str | None:
    """The type a column of ``column_type`` is written as in a Parquet release; None where Parquet holds it exactly."""
    if column_type in ("HUGEINT", "UHUGEINT"):
        return _WIDEST_DECIMAL
    # A UNION is stored as the STRUCT of its members, which is what a reader of the file then sees.
    if _holds_union(column_type) or any(inexact in column_type for inexact in _INEXACT_IN_PARQUET):
        return "VARCHAR"
    return None


def _holds_union(column_type: str) -> bool:
    return "UNION(" in column_type


def _refuse_beyond_decimal(engine: Engine, query: exp.Query, columns: Sequence[str]) -> None:
    """Raise an error naming the first of ``columns`` holding an integer of more than 38 digits, if any does."""
    for column in columns:
        beyond = exp.and_(sb.ident(column).is_(exp.Null()).not_(),
                          exp.TryCast(this=sb.ident(column), to=exp.DataType.build(_WIDEST_DECIMAL)).is_(exp.Null()))
        if engine.rows(exp.select(sb.lit(1)).from_(query.subquery()).where(beyond).limit(1)):
            raise AnonymizationError(
                f"column {column!r} holds an integer of more than 38 digits, which a Parquet release cannot hold "
                f"exactly (its widest number is {_WIDEST_DECIMAL}): publish it as a DuckDB file, or cast it to text")


def _copy(engine: Engine, query: exp.Query, path: Path, *options: tuple[str, exp.Expression]) -> None:
    engine.run(exp.Copy(this=query.subquery(), kind=False, files=[sb.lit(str(path))], params=[
        exp.CopyParameter(this=exp.var(name), expression=value) for name, value in options]))


def _storage_settings(types: Iterable[str]) -> dict[str, str]:
    """The settings of the connection that stores a release of columns of ``types``: no compression where DuckDB
    merges equal values (:data:`MERGES_EQUAL_VALUES`) and the release may hold equal values written otherwise, which
    its repeated rows put in runs (an Adult release stored uncompressed takes 4.7 MB against 0.8 MB)."""
    merge = MERGES_EQUAL_VALUES and not all(equal_values_written_alike(t) for t in types)
    return {"force_compression": "uncompressed"} if merge else {}


def _refuse_altered(own: DuckDBEngine, loaded: exp.Table, engine: DuckDBEngine, content: ReleaseContent) -> None:
    """Refuse a DuckDB file whose stored rows are not the rows released, naming the columns that differ: DuckDB
    before 2.0 stores values equal to others but written differently (-0.0 and 0.0, a month and 30 days) as one
    another where a column segment holds nothing else."""
    released = content.query.subquery()
    if fingerprint(own, loaded) == fingerprint(engine, released, content.weight):
        return
    differ = [c for c in own.columns(loaded)
              if fingerprint(own, exp.select(sb.col(c)).from_(loaded)) != fingerprint(
                  engine, exp.select(sb.col(c), *([sb.col(content.weight)] if content.weight else [])).from_(
                      released.copy()), content.weight)]
    raise ReleaseCheckFailed(f"release check: DuckDB {duckdb.__version__} stored other values than those released "
                             f"in columns {differ} of the DuckDB file (values equal to others but written otherwise, "
                             f"such as -0.0 among 0.0): publish to Parquet or CSV, or with DuckDB 2.0 or newer")


class _DuckDBFile(_Writer):
    """The file is written by a DuckDB of its own, never attached to the caller's connection: a file attached there
    stays open after DETACH while another cursor's transaction has seen the catalog (``duckdb_tables()``, a BI tool's
    schema browser), is checkpointed only when that transaction ends (after verification and the rename, altering a
    verified release), and meanwhile no other connection of the process may open it (DuckDB >= 1.4).  The rows go
    over as an uncompressed Parquet file beside the partial, each column cast back to its type (the types Parquet
    holds only approximately go as text)."""

    def write(self, engine, partial, content, seal):
        released = content.rows(engine)
        types = engine.types(released.subquery())
        as_text = {c for c, t in types.items() if any(inexact in t for inexact in _INEXACT_IN_PARQUET)}
        rows = self.staged(partial)
        try:
            _copy(engine, exp.select(*[exp.cast(sb.ident(c), exp.DataType.build("VARCHAR")).as_(c, quoted=True)
                                       if c in as_text else sb.ident(c) for c in types]).from_(released.subquery()),
                  rows, ("FORMAT", exp.var("parquet")), ("COMPRESSION", exp.var("uncompressed")), *parquet_options())
            # Views name their tables without a catalog, so they resolve in whatever name the file is opened
            # under; bound here, no temporary table or registered frame of the caller's can stand in for them.
            own = _fresh_reader(partial, writable=True, settings=_storage_settings(types.values()))
            try:
                staged = exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[sb.lit(str(rows))]))
                released = sb.table(content.table)
                own.run(sb.create_table_as(released, exp.select(*[
                    exp.cast(sb.ident(c), exp.DataType.build(t, dialect="duckdb", udt=True)).as_(c, quoted=True)
                    for c, t in types.items()]).from_(staged)))
                own.run(exp.Command(this="CHECKPOINT"))  # the rows as stored, compressed
                _refuse_altered(own, released, engine, content)
                # The digest of the rows as written: the query runs once (a perturbation draws anew on every run).
                info = seal(own, released)
                own.run(sb.create_table_as(sb.table(INFO_TABLE), _info_select(info)))
                for name, view in {**content.views, **{name: content.part(name) for name in content.parts}}.items():
                    own.run(sb.create_view_as(sb.table(name), view))
            finally:
                own.close()
        finally:
            _remove_files(rows)
        return info

    @staticmethod
    def staged(partial: Path) -> Path:
        """Where the rows wait, as Parquet, for the file's own connection to load them."""
        return partial.with_name(partial.name + ".rows")

    def reader(self, path, table):
        return _fresh_reader(path)

    def replace(self, partial, target):
        # The log belongs to the file it was written for: replayed into the new one it would alter a verified release.
        _remove_files(_wal(target))
        super().replace(partial, target)

    def remove(self, partial):
        _remove_files(partial, _wal(partial), self.staged(partial))


class _ParquetFile(_Writer):
    """A Parquet file; a column whose type Parquet holds only approximately is written as one it holds exactly, with
    the same text (what the content digest hashes): a whole 128-bit integer as DECIMAL(38, 0), and a TIME WITH TIME
    ZONE (Parquet moves it to UTC), a UNION or a nested value holding either as its text."""

    def write(self, engine, partial, content, seal):
        types = engine.types(content.query.subquery())
        exact = {c: _exact_in_parquet(t) if c != content.weight else None for c, t in types.items()}
        query = content.query if not any(exact.values()) else exp.select(*[
            exp.cast(sb.ident(c), exp.DataType.build(exact[c])).as_(c, quoted=True) if exact[c] else sb.ident(c)
            for c in types]).from_(content.query.subquery())
        try:
            # The metadata is written with the rows: the digest is computed from the query the rows come from.
            info = seal(engine, query.subquery(), content.weight)
            metadata_struct = exp.Struct(expressions=[
                exp.PropertyEQ(this=sb.ident(c), expression=sb.lit(_text(v) if v is not None else ""))
                for c, v in info.items()])
            _copy(engine, query if content.weight is None else repeated(engine, query, content.weight), partial,
                  ("FORMAT", exp.var("parquet")), ("KV_METADATA", metadata_struct), *parquet_options())
        except duckdb.ConversionException:
            _refuse_beyond_decimal(engine, content.query, [c for c, t in exact.items() if t == _WIDEST_DECIMAL])
            raise
        return info

    def reader(self, path, table):
        reader = _fresh_reader()
        file = exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[sb.lit(str(path))]))
        if table is not None:
            reader.run(sb.create_view_as(sb.table(table), exp.select(exp.Star()).from_(file)))
        metadata_rows = exp.Table(this=exp.Anonymous(this="parquet_kv_metadata", expressions=[sb.lit(str(path))]))
        # Keys and values are BLOBs: decode() reads them as UTF-8 (a cast would escape quotes as \x22).
        text = lambda c: exp.Anonymous(this="decode", expressions=[sb.col(c)])  # noqa: E731
        pairs = exp.select(text("key").as_("key"), text("value").as_("value")).from_(metadata_rows).subquery("m")
        columns = [exp.cast(exp.func("NULLIF", exp.func("MAX", exp.Case().when(sb.col("key").eq(sb.lit(c)),
                                                                                sb.col("value"))), sb.lit("")),
                            exp.DataType.build(t)).as_(c, quoted=True) for c, t in INFO_COLUMNS.items()]
        reader.run(sb.create_view_as(sb.table(INFO_TABLE), exp.select(*columns).from_(pairs)))
        return reader


class _ParquetFolder(_Writer):
    """A release written on Spark: a folder of Parquet part files as Spark writes them, with its info in
    ``_release_info.json`` (a name Spark's and Hadoop's readers skip).  Read back, and verified, in DuckDB."""

    def write(self, engine, partial, content, seal):
        engine.write_parquet(content.rows(engine), str(partial))
        # Digested in DuckDB, as every reader will: Spark writes numbers as text otherwise.
        parts = self.reader(partial, content.table, info=False)
        try:
            info = seal(parts, sb.table(content.table))
        finally:
            parts.close()
        described = {INFO_TABLE: {c: _text(v) for c, v in info.items()}}
        (partial / FOLDER_INFO).write_text(json.dumps(described, indent=1), encoding="utf-8")
        return info

    def reader(self, path, table, *, info: bool = True):
        reader = _fresh_reader()
        # Spark's parts are digested before their info is written.
        info_file = path / FOLDER_INFO
        described = json.loads(info_file.read_text(encoding="utf-8")) if info or info_file.is_file() else {}
        if TABLES in described:
            _stack_tables(reader, path, table, described[TABLES])
        elif table is not None:
            parts = exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[sb.lit(str(path / "*.parquet"))]))
            reader.run(sb.create_view_as(sb.table(table), exp.select(exp.Star()).from_(parts)))
        if info:
            reader.run(sb.create_view_as(sb.table(INFO_TABLE), _info_select(described[INFO_TABLE])))
        return reader

    def replace(self, partial, target):
        # A folder cannot be renamed over another, so the path is a symbolic link to a hidden folder beside it, and a
        # new release swaps the link in one rename: a kill leaves the earlier release or the new one at the path.
        if target.is_dir() and not _is_release_folder(target):
            raise AnonymizationError(f"{str(target)!r} is a folder but not a release: choose another path")
        folder = target.with_name(f".{target.name}.release-{os.getpid()}-{uuid.uuid4().hex}")
        link = target.with_name(f"{partial.name}.link")
        # Only a folder of ours goes once the link moves on: a link the user made to a folder elsewhere is not ours.
        earlier = target.resolve() if target.is_symlink() and _is_own_release_folder(target) else None
        os.replace(partial, folder)
        try:
            os.symlink(folder.name, link)
            if target.is_dir() and not target.is_symlink():
                # A release folder written before releases were links: it steps aside for the one rename.
                former = target.with_name(f".{target.name}.replaced-{uuid.uuid4().hex}")
                os.replace(target, former)
                earlier = former
            os.replace(link, target)
        except BaseException:
            _remove_files(link, folder)
            raise
        if earlier is not None and earlier != folder:
            _remove_files(earlier)

    def remove(self, partial):
        _remove_files(partial, partial.with_name(f"{partial.name}.link"))


class _ParquetTables(_ParquetFolder):
    """A release of several tables as Parquet: a folder holding one file per source table (``<table>.parquet``: its
    rows, its released columns), which BI tools and Spark join by the key, and ``_release_info.json``: the info, and
    how the files stack into the release's table (its columns in order, the record-table column), as verification and
    :func:`open_release` read it (the table and one view per file).  Written from DuckDB or Spark (a file per table
    is then a folder of part files), moved into place as a Spark release folder is."""

    def write(self, engine, partial, content, seal):
        partial.mkdir()
        released = content.rows(engine)
        layout = {"columns": engine.columns(released.subquery()), "record_table": content.record_table,
                  "files": {name: f"{name}.parquet" for name in content.parts}}
        # The rows are computed once for all the files: a query over several temporary tables, read per table.
        stacked = sb.table(f"__duckanon_stacked_{uuid.uuid4().hex}")
        engine.run(sb.create_table_as(stacked, released, temporary=True))
        try:
            types = engine.types(stacked)
            for name, file in layout["files"].items():
                part = content.part(name, stacked)
                exact = {c: _exact_in_parquet(types[c]) for c in content.parts[name]}
                engine.write_parquet(exp.select(*[
                    exp.cast(sb.ident(c), exp.DataType.build(exact[c])).as_(c, quoted=True) if exact[c] else sb.ident(c)
                    for c in content.parts[name]]).from_(part.subquery("p")), str(partial / file))
        finally:
            engine.run(sb.drop("TABLE", stacked))
        (partial / FOLDER_INFO).write_text(json.dumps({TABLES: layout}), encoding="utf-8")
        # Digested in DuckDB over the files as every reader stacks them.
        files = self.reader(partial, content.table, info=False)
        try:
            info = seal(files, sb.table(content.table))
        finally:
            files.close()
        described = {TABLES: layout, INFO_TABLE: {c: _text(v) for c, v in info.items()}}
        (partial / FOLDER_INFO).write_text(json.dumps(described, indent=1), encoding="utf-8")
        return info


def _stack_tables(reader: DuckDBEngine, path: Path, table: str | None, layout: Mapping) -> None:
    """In ``reader``, one view per file of a :class:`_ParquetTables` release, under its table's name, and (when
    ``table`` is given) the release's table: the files stacked, a column a table lacks NULL (of the type the other
    files give it), each row naming its table in the record-table column."""
    files = {name: reader.read_file(str(path / file), "parquet") for name, file in layout["files"].items()}
    types = {name: reader.types(file) for name, file in files.items()}
    for name, file in files.items():
        reader.run(sb.create_view_as(sb.table(name), exp.select(exp.Star()).from_(file)))
    if table is None:
        return
    column_types = {c: t for name in files for c, t in types[name].items()}
    parts = []
    for name in files:
        parts.append(exp.select(*[
            sb.lit(name).as_(c, quoted=True) if c == layout["record_table"]
            else sb.col(c) if c in types[name]
            else exp.cast(exp.Null(), exp.DataType.build(column_types[c], dialect="duckdb", udt=True)).as_(
                c, quoted=True)
            for c in layout["columns"]]).from_(sb.table(name)))
    stacked = parts[0]
    for part in parts[1:]:
        stacked = exp.union(stacked, part, distinct=False)
    reader.run(sb.create_view_as(sb.table(table), stacked))


def _is_own_release_folder(target: Path) -> bool:
    """Whether the link at ``target`` points to a hidden release folder duckanon made beside it."""
    pointed = target.resolve()
    return pointed.parent == target.parent.resolve() and pointed.name.startswith(f".{target.name}.release-")


class _CsvFile(_Writer):
    """A CSV file and its ``.json`` (column types, the CSV's SHA-256, the info).

    Two files cannot be renamed at once, so replacing a release goes through a companion that describes both the new
    CSV and the earlier one (``previous``): first that companion goes into place (the earlier CSV still reads, as
    ``previous``), then the new CSV, then the new companion alone.  A kill at any point leaves a release that reads
    whole, the earlier or the new one."""

    def write(self, engine, partial, content, seal):
        released = content.rows(engine)
        _copy(engine, released, partial, ("FORMAT", exp.var("csv")), ("HEADER", exp.true()))
        # A UNION's text does not say which member it is, so DuckDB cannot read it back as one: its reader gets text.
        types = {c: "VARCHAR" if _holds_union(t) else t for c, t in engine.types(released.subquery()).items()}
        info = seal(engine, content.query.subquery(), content.weight)
        described = {"columns": types, "sha256": _sha256(partial),
                     INFO_TABLE: {c: _text(v) for c, v in info.items()}}
        self.companions(partial)[0].write_text(json.dumps(described, indent=1), encoding="utf-8")
        return info

    def companions(self, path):
        return [path.with_name(path.name + INFO_SUFFIX)]

    def replace(self, partial, target):
        [companion], [final] = self.companions(partial), self.companions(target)
        earlier = self._generation(target) if target.is_file() and final.is_file() else None
        if earlier is not None:
            both = {**json.loads(companion.read_text(encoding="utf-8")), "previous": earlier}
            self._bridge(partial).write_text(json.dumps(both, indent=1), encoding="utf-8")
            os.replace(self._bridge(partial), final)
        os.replace(partial, target)
        os.replace(companion, final)

    def remove(self, partial):
        _remove_files(partial, *self.companions(partial), self._bridge(partial))

    def _bridge(self, partial: Path) -> Path:
        """The companion describing both the new CSV and the earlier one, while one replaces the other."""
        return partial.with_name(partial.name + ".bridge" + INFO_SUFFIX)

    def _generation(self, path: Path) -> dict | None:
        """What the companion says of the CSV at ``path`` now (itself or its ``previous``); None if neither matches."""
        try:
            described = json.loads(self.companions(path)[0].read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        digest = _sha256(path)
        for generation in (described, described.get("previous")):
            if generation and generation.get("sha256") == digest:
                return {k: v for k, v in generation.items() if k != "previous"}
        return None

    def reader(self, path, table):
        described = self._generation(path)
        if described is None:
            raise DigestMismatch(f"{str(path)!r} does not match its {INFO_SUFFIX}: the CSV or its info was changed "
                                 f"after publishing (its SHA-256 is not the one recorded)")
        reader = _fresh_reader()
        if table is not None:
            columns = exp.Struct(expressions=[exp.PropertyEQ(this=sb.ident(c), expression=sb.lit(t))
                                              for c, t in described["columns"].items()])
            file = exp.Table(this=exp.Anonymous(this="read_csv", expressions=[
                sb.lit(str(path)), exp.PropertyEQ(this=exp.var("header"), expression=exp.true()),
                exp.PropertyEQ(this=exp.var("columns"), expression=columns)]))
            reader.run(sb.create_view_as(sb.table(table), exp.select(exp.Star()).from_(file)))
        reader.run(sb.create_view_as(sb.table(INFO_TABLE), _info_select(described[INFO_TABLE])))
        return reader


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_WRITERS: dict[str, _Writer] = {"duckdb": _DuckDBFile(), "parquet": _ParquetFile(), "csv": _CsvFile()}
_FOLDER = _ParquetFolder()
_TABLES_FOLDER = _ParquetTables()
FORMATS = tuple(_WRITERS)
