"""A release's content digest: one SHA-256 over its rows, in an order of their own, computed in SQL.

The digest must not depend on how an engine laid the rows out in a file (row groups, parallel writers, a CSV's
quoting), so rows are put in a canonical order before they are hashed: the order of their own hashes.  Sorting ten
million rows' text as one string would not fit a query's memory, so the hashes are sorted within 4,096 buckets (by
their first three hex digits) and the buckets in turn.  The definition, which any SQL engine with SHA-256 can
recompute (``sql/duckanon.sql``'s ``anon_verify`` does):

- a value's text is ``-`` for NULL, else ``length(t) || ':' || t`` with ``t = CAST(value AS VARCHAR)`` (the length in
  characters makes the concatenation of a row's values unambiguous);
- a row's hash is ``sha256`` (lower-case hex) of its values' texts concatenated in column order;
- a bucket is the first three hex digits of a row's hash; its hash is ``sha256`` of its rows' hashes sorted and
  concatenated;
- the digest is ``sha256`` of the header (each column's name as ``length || ':' || name``, in order), ``|``, and each
  bucket's three digits followed by its hash, buckets in ascending order; it is written ``sha256:<hex>``.

Identical rows are hashed once each, so the digest counts them: deleting or adding a row changes it.

:func:`digest_query` is that definition as one SQL query (the view a DuckDB release carries runs it); its aggregate
holds every row's hash at once, 64 bytes a row.  :func:`content_digest`, which publishing and
verification use, has DuckDB hash the rows and sort the hashes (a sort that spills to disk when it must) and folds
the sorted stream bucket by bucket with :mod:`hashlib`, in memory bounded by a batch: the same digest.

Building each row's text is most of a digest's cost, so it is built once per distinct row (a release repeats each
class's values in all its records): the rows are grouped first, and a row's hash enters its bucket as many times as
the row occurs, which is the same stream the definition sorts.  A release is digested once, as it is written
(:func:`digested`), and the file read back is checked against the rows digested by a :func:`fingerprint` (DuckDB's
``hash`` of each row, summed), which builds no text; where a column reads back as another type than it was digested
at, the file is digested again instead.  The same pass counts the sizes of the rows' classes, for the release's
info (:func:`digested` with ``classes``): a window over the distinct rows, so the rows are read once for both.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..engine import DuckDBEngine
from ..sqlgen import build as sb

PREFIX = "sha256:"
_HASH, _BUCKET, _BUCKET_HASH, _ROW, _ROWS, _CLASS, _REPEATED = (
    "__row_hash", "__bucket", "__bucket_hash", "__row", "__rows", "__class_size", "__repeated")


def _call(name: str, *arguments: exp.Expression) -> exp.Anonymous:
    # By name, as DuckDB spells them: sqlglot's own nodes for these differ between its versions.
    return exp.Anonymous(this=name, expressions=list(arguments))


def header(columns: Sequence[str]) -> str:
    """The columns' part of the digest, as :func:`digest_query` writes it."""
    return "".join(f"{len(c)}:{c}" for c in columns) + "|"


def _named(relation: exp.Expression) -> exp.Expression:
    return (relation.subquery("released") if isinstance(relation, exp.Query)
            else exp.alias_(relation, "released", quoted=True))


def _row_hashes(relation: exp.Expression, columns: Sequence[str]) -> exp.Select:
    return exp.select(_call("sha256", sb.concatenated([sb.length_prefixed(sb.col(c)) for c in columns]))
                      .as_(_HASH, quoted=True)).from_(_named(relation))


def _distinct_row_hashes(relation: exp.Expression, types: Mapping[str, str], weight: str | None = None) -> exp.Select:
    """Each distinct row's hash and how many records it stands for (``__row_hash``, ``__rows``), over its columns
    renamed by position (``__column_<i>``, apart from the names used here)."""
    positions = _positions(types)
    return _row_hashes(rows_by_text(relation, types, _ROWS, weight, positions), positions).select(
        sb.col(_ROWS), copy=False)


def _positions(types: Mapping[str, str]) -> list[str]:
    return [f"__column_{i}" for i in range(len(types))]


def digest_query(relation: exp.Expression, types: Mapping[str, str]) -> exp.Select:
    """One row, one column: the digest (``sha256:<hex>``) of ``relation``'s columns of ``types`` (name -> DuckDB type),
    in that order.  Each distinct row is hashed once (:func:`rows_by_text`), and its hash repeated as often as the row
    occurs: sorting those repeats as strings orders them as their hashes (all of one length), so a bucket's sorted
    concatenation is the definition's."""
    rows = _distinct_row_hashes(relation, types).select(
        _call("repeat", sb.col(_HASH), sb.col(_ROWS)).as_(_REPEATED, quoted=True), copy=False)
    bucket = _call("substr", sb.col(_HASH), sb.lit(1), sb.lit(3))
    sorted_text = lambda column: _call("array_to_string", _call("list_sort", _call("list", column)), sb.lit(""))  # noqa: E731
    buckets = (exp.select(bucket.as_(_BUCKET, quoted=True),
                          _call("sha256", sorted_text(sb.col(_REPEATED))).as_(_BUCKET_HASH, quoted=True))
               .from_(rows.subquery("row_hashes")).group_by(bucket.copy()))
    chained = exp.func("COALESCE", sorted_text(exp.Concat(expressions=[sb.col(_BUCKET), sb.col(_BUCKET_HASH)],
                                                          safe=False)), sb.lit(""))
    return exp.select(exp.Concat(expressions=[
        sb.lit(PREFIX), _call("sha256", exp.Concat(expressions=[sb.lit(header(list(types))), chained], safe=False))],
        safe=False).as_("content_digest", quoted=True)).from_(buckets.subquery("buckets"))


@dataclass(frozen=True)
class Digested:
    """Rows digested (:func:`digested`): their content digest and, for checking that a file read back holds these very
    rows without digesting it again, their fingerprint (:func:`fingerprint`) with the column types it was taken at."""

    digest: str
    fingerprint: tuple[int, int]
    types: tuple[str, ...]
    # With ``classes`` given: the class sizes that occur (ascending) and how many classes have each.
    class_sizes: tuple[np.ndarray, np.ndarray] | None = None


def content_digest(engine: DuckDBEngine, relation: exp.Expression) -> str:
    """The digest of every column of ``relation``: the rows' hashes sorted by DuckDB, folded as they stream in."""
    return _digest(engine, relation, engine.types(relation), fingerprinted=False).digest


def digested(engine: DuckDBEngine, relation: exp.Expression, classes: Sequence[str] | None = None,
             weight: str | None = None) -> Digested:
    """:func:`content_digest` of ``relation`` and its :func:`fingerprint`, and with ``classes`` (columns) the sizes of
    the classes of rows equal in them, from one pass over the rows (a query that draws anew on every run gives them
    all of the same rows).  With ``weight`` (a column), each row of ``relation`` stands for that many rows, which
    are what is digested (the weight itself is not)."""
    types = {c: t for c, t in engine.types(relation).items() if c != weight}
    return _digest(engine, relation, types, fingerprinted=True, classes=classes, weight=weight)


def fingerprint(engine: DuckDBEngine, relation: exp.Expression, weight: str | None = None) -> tuple[int, int]:
    """``relation``'s rows and the sum of DuckDB's ``hash`` of each (all its columns; with ``weight``, a column, each
    row stands for that many rows, and the weight is not hashed): the same multiset of rows of the same types gives
    the same fingerprint in one DuckDB, at a hundredth of a digest's cost (no row's text is built).  DuckDB's hash may
    change between its versions, so a fingerprint is never recorded, only compared within the process that took it."""
    types = {c: t for c, t in engine.types(relation).items() if c != weight}
    # Summed as 38-digit integers: DuckDB's 64-bit hashes overflow BIGINT, and Spark has no HUGEINT.
    whole = exp.DataType.build("DECIMAL(38, 0)")
    copies = sb.lit(1) if weight is None else exp.cast(sb.col(weight), whole)
    hashed = exp.cast(_row_hash(types), whole.copy())
    query = exp.select(*[exp.func("COALESCE", exp.func("SUM", term), sb.lit(0)) for term in (
        copies, exp.Mul(this=hashed, expression=copies.copy()))]).from_(_named(relation))
    (rows, total), = engine.rows(query)
    return int(rows), int(total)


def _row_hash(types: Mapping[str, str]) -> exp.Expression:
    """DuckDB's ``hash`` of a row's columns (of ``types``), what a fingerprint sums: of what tells their texts apart
    (:func:`_group_key`).  DuckDB hashes equal values alike (-0.0 and 0.0; 'A' and 'a' under NOCASE), and a file may
    hold one in place of the other: a file read back carries no collation, and DuckDB before 2.0 stores equal values
    as one another."""
    return _call("hash", *[_group_key(sb.col(c), t) for c, t in types.items()])


def _base_type(type_name: str) -> str:
    return type_name.split("(", 1)[0].strip().upper()


def _utf8(text: exp.Expression) -> exp.Expression:
    # sqlglot's node: DuckDB's ENCODE takes the text alone, Spark's names the charset, which the node writes for it.
    return exp.Encode(this=text, charset=sb.lit("utf-8"))


# Types whose equal values always have the same text: their rows can be grouped by the values themselves.  A
# VARCHAR may carry a collation (which DESCRIBE does not show) under which unlike texts are equal, so it is grouped
# by its bytes; any other type (a float's -0.0 and 0.0, an interval's month and 30 days, a nested value) by its text.
_EXACT_TYPES = frozenset({
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT", "DECIMAL", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
    "TIMESTAMP WITH TIME ZONE", "UUID", "BLOB", "ENUM"})


def equal_values_written_alike(type_name: str) -> bool:
    """Whether equal values of ``type_name`` always have the same text, a VARCHAR's where no collation applies."""
    return _base_type(type_name) in _EXACT_TYPES or _base_type(type_name) == "VARCHAR"


def _group_key(column: exp.Expression, type_name: str) -> exp.Expression:
    """What groups the rows of ``column``'s values so that one group's values all have the same text."""
    base = _base_type(type_name)
    if base in _EXACT_TYPES:
        return column
    return _utf8(column if base == "VARCHAR" else exp.cast(column, exp.DataType.build("VARCHAR")))


def rows_by_text(relation: exp.Expression, types: Mapping[str, str], count: str, weight: str | None = None,
                 names: Sequence[str] | None = None) -> exp.Select:
    """``relation``'s rows grouped so that the rows of a group have the same text in every column of ``types`` (one
    row of each group, its columns as ``names`` say, their own names by default), and how many records each group
    stands for, as ``count``: its rows, or the sum of their ``weight`` where each row stands for that many."""
    names = list(types) if names is None else names
    records = exp.func("COUNT", exp.Star()) if weight is None else exp.cast(
        exp.func("SUM", sb.col(weight)), exp.DataType.build("BIGINT"))
    return exp.select(*[_group_value(sb.col(column), t).as_(name, quoted=True)
                        for (column, t), name in zip(types.items(), names)], records.as_(count, quoted=True)).from_(
        _named(relation)).group_by(*[_group_key(sb.col(c), t) for c, t in types.items()])


def _group_value(column: exp.Expression, type_name: str) -> exp.Expression:
    """A group's value of ``column``, grouped by :func:`_group_key`: the key itself where it is the value or its
    bytes (a third of a grouping's time goes to picking a row's value otherwise), else any row's value (all have
    the same text)."""
    base = _base_type(type_name)
    if base in _EXACT_TYPES:
        return column
    if base == "VARCHAR":
        return exp.Decode(this=_group_key(column, type_name), charset=sb.lit("utf-8"))
    return exp.func("ANY_VALUE", column)


def _digest(engine: DuckDBEngine, relation: exp.Expression, types: dict[str, str], *, fingerprinted: bool,
            classes: Sequence[str] | None = None, weight: str | None = None) -> Digested:
    # A release repeats each class's values in every record of the class: its rows' text is built once per distinct row.
    positions = _positions(types)
    query = _distinct_row_hashes(relation, types, weight)
    if fingerprinted:
        query = query.select(_row_hash(dict(zip(positions, types.values()))).as_(_ROW, quoted=True), copy=False)
    if classes is not None:
        # Each distinct row's class size, its class compared by value (as GROUP BY would) over the distinct rows.
        at = dict(zip(types, positions))
        query = query.select(exp.Window(this=exp.func("SUM", sb.col(_ROWS)), partition_by=[
            sb.col(at[c]) for c in classes]).as_(_CLASS, quoted=True), copy=False)
    digest = hashlib.sha256(header(list(types)).encode())
    bucket, rows, count, total = None, hashlib.sha256(), 0, 0
    in_classes_of: collections.Counter[int] = collections.Counter()  # records, by the size of their class
    for batch in engine.batches(query.order_by(sb.col(_HASH))):
        for row in batch:
            row_hash, repeats = row[0], row[1]
            count += repeats
            if fingerprinted:
                total += row[2] * repeats
            if classes is not None:
                in_classes_of[row[-1]] += repeats
            if row_hash[:3] != bucket:
                if bucket is not None:
                    digest.update(f"{bucket}{rows.hexdigest()}".encode())
                bucket, rows = row_hash[:3], hashlib.sha256()
            _update_repeated(rows, row_hash.encode(), repeats)
    if bucket is not None:
        digest.update(f"{bucket}{rows.hexdigest()}".encode())
    sizes = np.array(sorted(in_classes_of), dtype=np.int64)
    class_sizes = None if classes is None else (
        sizes, np.array([in_classes_of[size] // size for size in sizes], dtype=np.int64))
    return Digested(PREFIX + digest.hexdigest(), (count, total), tuple(types.values()), class_sizes)


def _update_repeated(hashed: hashlib._Hash, text: bytes, repeats: int, chunk: int = 65_536) -> None:
    """``hashed`` fed ``text`` ``repeats`` times over, ``chunk`` copies at a time (a class of millions of records
    would otherwise be one string of their hashes)."""
    whole, rest = divmod(repeats, chunk)
    if whole:
        block = text * chunk
        for _ in range(whole):
            hashed.update(block)
    hashed.update(text * rest)
