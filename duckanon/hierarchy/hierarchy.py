"""Generalization hierarchies.

A hierarchy is a table with one row per original value: ``level_0`` is the value itself, ``level_1`` … ``level_h``
are ever more general replacements, normally ending in ``*``.  That is ARX's CSV layout, and it is how hierarchies
live in DuckDB (schema ``anon``, one table per hierarchy, every level VARCHAR).  Data values match ``level_0`` by
their text form (``CAST(value AS VARCHAR)``).

A row whose ``level_0`` is NULL (``NULL`` in ARX CSV, as ARX writes missing values) says how missing values
generalize.  Without such a row a NULL stays NULL on every level: missing is a value of its own.

Interval hierarchies built by :meth:`Hierarchy.intervals` also compile to a CASE expression over the number, so
they generalize values the builder never saw, without a join.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os
from collections.abc import Iterable, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import is_missing
from ..deferred import pandas as pd
from ..engine import Engine, as_engine
from ..errors import HierarchyError
from ..sqlgen import build as sb
from .notation import NumberFormat, half_open_label

SCHEMA = "anon"
TOP = "*"
ARX_NULL = "NULL"


def level_column(level: int) -> str:
    return f"level_{level}"


def _text(value: object) -> str | None:
    if is_missing(value):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _preview(values: Iterable[object], most: int = 10) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:most])
    return shown + (f", … ({len(values)} in all)" if len(values) > most else "")


class Hierarchy:
    """A validated generalization hierarchy: rows of level values, leaf first."""

    def __init__(self, rows: Iterable[Sequence[object]], *, name: str = "hierarchy"):
        self.name = name
        self.rows: list[tuple[str | None, ...]] = [tuple(_text(v) for v in row) for row in rows]
        self._validate()

    # ----------------------------------------------------------------- structure
    @property
    def levels(self) -> int:
        """Number of levels, the original value's level 0 included."""
        return len(self.rows[0])

    @property
    def height(self) -> int:
        """Highest level index."""
        return self.levels - 1

    @property
    def values(self) -> list[str | None]:
        return [row[0] for row in self.rows]

    def _validate(self) -> None:
        if not self.rows:
            raise HierarchyError(f"hierarchy {self.name!r} is empty")
        widths = {len(row) for row in self.rows}
        if len(widths) > 1:
            counts = pd.Series([len(r) for r in self.rows])
            common = counts.mode().iloc[0]
            odd = [r[0] for r in self.rows if len(r) != common]
            raise HierarchyError(
                f"hierarchy {self.name!r} has rows of unequal length ({sorted(widths)} levels); "
                f"most have {common}, these values do not: {_preview(odd)}")
        if self.levels < 1 or widths == {0}:
            raise HierarchyError(f"hierarchy {self.name!r} has rows with no values")
        seen: dict[str | None, int] = {}
        duplicated = [r[0] for i, r in enumerate(self.rows) if seen.setdefault(r[0], i) != i]
        if duplicated:
            raise HierarchyError(f"hierarchy {self.name!r} lists these values more than once: {_preview(duplicated)}")
        for level in range(1, self.levels):
            parents: dict[str | None, set[str | None]] = {}
            for row in self.rows:
                parents.setdefault(row[level - 1], set()).add(row[level])
            conflicts = {child: sorted(p, key=str) for child, p in parents.items() if len(p) > 1}
            if conflicts:
                child, ps = next(iter(conflicts.items()))
                raise HierarchyError(
                    f"hierarchy {self.name!r}: value {child!r} on level {level - 1} has two parents on level {level}: "
                    f"{_preview(ps)} ({len(conflicts)} such values)")

    def level_values(self, level: int) -> list[str | None]:
        return sorted({row[level] for row in self.rows}, key=lambda v: (v is None, str(v)))

    def labels(self, level: int) -> set[str | None]:
        """Every value this hierarchy can produce on ``level``."""
        return set(self.level_values(level))

    def leaves_under(self, level: int) -> dict[str | None, int]:
        """For each value on ``level``, how many original values it covers."""
        counts: dict[str | None, int] = {}
        for row in self.rows:
            counts[row[level]] = counts.get(row[level], 0) + 1
        return counts

    def missing_split(self) -> tuple[str, int, str] | None:
        """Where this hierarchy would split missing values from a class they share: without a NULL row a NULL stays
        NULL on every level, so a value generalized to NULL on some level shares NULL's class there, and leaves it
        where it is generalized to a label above.  (That value, the level, the label above) or None."""
        if any(row[0] is None for row in self.rows):
            return None
        for row in self.rows:
            for level in range(1, self.levels - 1):
                if row[level] is None and row[level + 1] is not None:
                    return row[0], level, row[level + 1]
        return None

    def check_level(self, level: int, attribute: str) -> None:
        if not isinstance(level, int) or not 0 <= level <= self.height:
            raise HierarchyError(
                f"level {level!r} for {attribute!r} is outside its hierarchy's levels 0..{self.height}")

    def columns(self) -> dict[str, np.ndarray]:
        """Each level's values (``level_<j>``), row by row, as NumPy object arrays."""
        return {level_column(i): np.array([row[i] for row in self.rows], dtype=object) for i in range(self.levels)}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.columns(), dtype=object)

    def generalize_sql(self, value: exp.Expression, level: int) -> exp.Expression | None:
        """A SQL expression generalizing ``value`` to ``level`` without a join, or None when a join is needed."""
        return None

    def __repr__(self) -> str:
        return f"Hierarchy({self.name!r}, {len(self.rows)} values, {self.levels} levels)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hierarchy) and self.rows == other.rows

    # --------------------------------------------------------------- in and out
    @classmethod
    def from_lists(cls, rows: Iterable[Sequence[object]], *, name: str = "hierarchy") -> Hierarchy:
        return cls(rows, name=name)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, name: str = "hierarchy") -> Hierarchy:
        """Columns in level order, leaf first."""
        return cls(frame.astype(object).itertuples(index=False, name=None), name=name)

    @classmethod
    def from_mapping(cls, parents: dict[object, Sequence[object]], *, name: str = "hierarchy") -> Hierarchy:
        """``{value: [level_1, level_2, …]}``."""
        return cls(((value, *ancestors) for value, ancestors in parents.items()), name=name)

    @classmethod
    def from_arx_csv(cls, source: str | os.PathLike | io.TextIOBase, *, name: str | None = None,
                     delimiter: str = ";") -> Hierarchy:
        """Read ARX's hierarchy CSV: one row per value, ``;``-separated, value first; ``NULL`` means missing."""
        if isinstance(source, (str, os.PathLike)):
            name = name or os.path.splitext(os.path.basename(source))[0]
            with open(source, newline="", encoding="utf-8-sig") as handle:
                return cls.from_arx_csv(handle, name=name, delimiter=delimiter)
        rows = [row for row in csv.reader(source, delimiter=delimiter) if row and any(cell for cell in row)]
        rows = [[None if i == 0 and v == ARX_NULL else v for i, v in enumerate(row)] for row in rows]
        return cls(rows, name=name or "hierarchy")

    def to_arx_csv(self, target: str | os.PathLike | io.TextIOBase, *, delimiter: str = ";") -> None:
        if isinstance(target, (str, os.PathLike)):
            with open(target, "w", newline="", encoding="utf-8") as handle:
                self.to_arx_csv(handle, delimiter=delimiter)
            return
        writer = csv.writer(target, delimiter=delimiter, lineterminator="\n")
        for row in self.rows:
            writer.writerow([ARX_NULL if v is None else v for v in row])

    def store(self, database: Engine | duckdb.DuckDBPyConnection, table_name: str, *,
              schema: str = SCHEMA) -> exp.Table:
        """Write this hierarchy as a table of ``database`` (replacing one of that name) and return it."""
        engine = as_engine(database)
        target = sb.table(table_name, schema)
        engine.run(exp.Create(this=sb.ident(schema), kind="SCHEMA", exists=True))
        columns = [exp.ColumnDef(this=sb.ident(level_column(i)), kind=exp.DataType.build("VARCHAR"))
                   for i in range(self.levels)]
        engine.run(exp.Create(this=exp.Schema(this=target, expressions=columns), kind="TABLE", replace=True))
        # One INSERT … SELECT from the rows as columns: one statement, so one commit on a database file.
        with engine.registered(self.columns()) as rows:
            engine.run(exp.insert(exp.select(exp.Star()).from_(rows), target))
        return target

    @classmethod
    def from_table(cls, database: Engine | duckdb.DuckDBPyConnection, table_name: str, *,
                   schema: str | None = SCHEMA, name: str | None = None) -> Hierarchy:
        engine = as_engine(database)
        source = sb.table(table_name, schema)
        names = engine.columns(source)
        expected = [level_column(i) for i in range(len(names))]
        if names != expected:
            where = f"{schema}.{table_name}" if schema else table_name
            raise HierarchyError(f"hierarchy table {where!r} has columns {names}; a hierarchy table's columns are "
                                 f"{expected} (the original value, then each level): rename them back, or store the "
                                 f"hierarchy again")
        query = exp.select(*(sb.col(c) for c in names)).from_(source)
        return cls(engine.rows(query), name=name or table_name)

    # ----------------------------------------------------------------- builders
    @classmethod
    def intervals(cls, values: Iterable[float], *, widths: Sequence[float] | None = None,
                  cuts: Sequence[Sequence[float]] | None = None, origin: float = 0,
                  name: str = "hierarchy") -> IntervalHierarchy:
        """Numeric intervals ``[lo, hi)`` (``lo <= value < hi``), finer levels first, ending in ``*``.

        The numbers of all labels are written alike so that labels sort as text in numeric order (zero-padded, the
        same decimals: ``[005, 010)``, ``[010, 020)``, ``[100, 120)``; see :mod:`duckanon.hierarchy.notation`).

        ``widths`` gives nested widths (each a multiple of the one before, e.g. 5, 10, 20) counted from ``origin``;
        ``cuts`` gives each level's cut points (each level's points a subset of the finer level's).
        """
        return IntervalHierarchy(values, widths=widths, cuts=cuts, origin=origin, name=name)

    @classmethod
    def top_bottom(cls, values: Iterable[float], *, bottom: float | None = None, top: float | None = None,
                   widths: Sequence[float] | None = None, origin: float = 0, name: str = "hierarchy") -> Hierarchy:
        """Top and bottom coding as a level (sdcMicro's ``topBotCoding``): level 1 keeps each value from ``bottom``
        to ``top`` and codes those below ``bottom`` as ``< bottom`` and those above ``top`` as ``> top``; ``widths``
        adds levels of nested intervals over the kept values, labelled as :meth:`intervals` labels them (the codes
        stay), then ``*``.  A released code's typed bounds are the smallest and largest values of the hierarchy
        under it: build it over the public domain (``range(0, 121)`` for ages), not the data, when the data's
        extremes are secret."""
        numbers = sorted({float(v) for v in values if _text(v) is not None})
        if not numbers:
            raise HierarchyError(f"hierarchy {name!r} is empty: no numbers to code")
        if bottom is None and top is None:
            raise HierarchyError(f"hierarchy {name!r}: give a top code, a bottom code, or both")
        for code, value in (("bottom", bottom), ("top", top)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise HierarchyError(f"hierarchy {name!r}: the {code} code must be a finite number, got {value!r}")
        if bottom is not None and top is not None and not bottom < top:
            raise HierarchyError(f"hierarchy {name!r}: the bottom code {bottom} must lie below the top code {top}")
        low = -math.inf if bottom is None else float(bottom)
        high = math.inf if top is None else float(top)
        kept = [v for v in numbers if low <= v <= high]
        intervals = cls.intervals(kept, widths=widths, origin=origin, name=name).rows if widths and kept else []
        coarser = {row[0]: list(row[1:-1]) for row in intervals}
        below, above = f"< {_format_number(low)}", f"> {_format_number(high)}"
        levels = len(widths or ())

        def row(value: float) -> list[str]:
            code = below if value < low else above if value > high else None
            if code is not None:
                return [_format_number(value), *[code] * (levels + 1), TOP]
            text = _format_number(value)
            return [text, text, *coarser.get(text, []), TOP]

        return cls([row(v) for v in numbers], name=name)

    @classmethod
    def redaction(cls, values: Iterable[object], *, mask: str = "*", name: str = "hierarchy") -> Hierarchy:
        """Redact from the right one character a level: 47677 → 4767* → 476** → … → *."""
        texts = sorted({t for t in (_text(v) for v in values) if t is not None})
        if not texts:
            raise HierarchyError(f"hierarchy {name!r} is empty: no values to redact")
        depth = max(len(t) for t in texts)

        def redact(text: str, level: int) -> str:
            keep = max(len(text) - level, 0)
            return text[:keep] + mask * (len(text) - keep)

        # Up to one kept character for the longest value, then the root: a fully masked level would be a second top.
        return cls([[redact(t, level) for level in range(depth)] + [TOP] for t in texts], name=name)

    @classmethod
    def dates(cls, values: Iterable[object], *, name: str = "hierarchy") -> Hierarchy:
        """Day → month (``2020-03``) → year (``2020``) → decade (``2020-2029``) → ``*``."""
        days = sorted({pd.Timestamp(v).date() for v in values if _text(v) is not None})
        if not days:
            raise HierarchyError(f"hierarchy {name!r} is empty: no dates")

        def row(day: dt.date) -> list[str]:
            decade = day.year - day.year % 10
            return [day.isoformat(), f"{day.year:04d}-{day.month:02d}", f"{day.year:04d}",
                    f"{decade:04d}-{decade + 9:04d}", TOP]

        return cls([row(d) for d in days], name=name)

    @classmethod
    def ordered_groups(cls, ordered_values: Sequence[object], *, sizes: Sequence[int],
                       name: str = "hierarchy") -> Hierarchy:
        """Group categories in their given order: ``sizes[0]`` values per group on level 1, then ``sizes[1]``
        level-1 groups per level-2 group, and so on, ending in ``*``.  A group is labelled ``first..last``."""
        values = [_text(v) for v in ordered_values]
        if not values:
            raise HierarchyError(f"hierarchy {name!r} is empty: no categories to group")
        if len(set(values)) != len(values):
            dupes = sorted({v for v in values if values.count(v) > 1}, key=str)
            raise HierarchyError(f"hierarchy {name!r}: categories listed twice: {_preview(dupes)}")
        if not sizes or any(not isinstance(s, int) or s < 2 for s in sizes):
            raise HierarchyError(f"hierarchy {name!r}: group sizes must be whole numbers of at least 2, got {sizes!r}")
        columns = [values]
        span = 1
        for size in sizes:
            span *= size
            labels = []
            for i in range(len(values)):
                first = (i // span) * span
                last = min(first + span, len(values)) - 1
                labels.append(values[first] if first == last else f"{values[first]}..{values[last]}")
            columns.append(labels)
        columns.append([TOP] * len(values))
        return cls(list(zip(*columns)), name=name)


def _steps(number: float) -> float:
    """``number`` without float noise (to 9 decimals): 0.7 / 0.1 is 6.999…, and 3 * 0.1 is 0.30000000000000004,
    which would put 0.7 above the last cut and 0.3 below the cut at 0.3."""
    return round(number, 9)


def _format_number(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class IntervalHierarchy(Hierarchy):
    """Numeric intervals; also compiles to a CASE expression over the number."""

    def __init__(self, values: Iterable[float], *, widths: Sequence[float] | None, cuts: Sequence[Sequence[float]] | None,
                 origin: float, name: str):
        numbers = sorted({float(v) for v in values if _text(v) is not None})
        if not numbers:
            raise HierarchyError(f"hierarchy {name!r} is empty: no numbers to build intervals over")
        if (widths is None) == (cuts is None):
            raise HierarchyError(f"hierarchy {name!r}: give either widths or cuts")
        if widths is not None:
            cuts = self._cuts_from_widths(numbers, widths, origin, name)
        if not cuts:
            raise HierarchyError(f"hierarchy {name!r}: give at least one level of intervals (widths or cuts)")
        self.cuts = [sorted(float(c) for c in level) for level in cuts]
        self._check_cuts(numbers, name)
        # Every label writes its numbers alike, so that they sort as text in numeric order (duckanon.hierarchy.notation).
        self.number_format = NumberFormat.of(c for level in self.cuts for c in level)
        rows = [[_format_number(v)] + [self._label(level, v) for level in range(len(self.cuts))] + [TOP]
                for v in numbers]
        super().__init__(rows, name=name)

    @staticmethod
    def _cuts_from_widths(numbers: list[float], widths: Sequence[float], origin: float, name: str) -> list[list[float]]:
        if any(w <= 0 for w in widths):
            raise HierarchyError(f"hierarchy {name!r}: interval widths must be positive, got {list(widths)!r}")
        for finer, coarser in zip(widths, widths[1:]):
            if not _steps(coarser / finer).is_integer():
                raise HierarchyError(
                    f"hierarchy {name!r}: widths must nest (each a multiple of the one before); {coarser} is not a "
                    f"multiple of {finer}")
        if not widths:
            return []
        # Every level spans the coarsest level's range, so each coarser level's cut points are also finer ones'.
        low, high, widest = numbers[0], numbers[-1], widths[-1]
        first = origin + math.floor(_steps((low - origin) / widest)) * widest
        last = origin + (math.floor(_steps((high - origin) / widest)) + 1) * widest
        return [[_steps(first + i * width) for i in range(int(round((last - first) / width)) + 1)] for width in widths]

    def _check_cuts(self, numbers: list[float], name: str) -> None:
        for level, points in enumerate(self.cuts, start=1):
            if len(points) < 2:
                raise HierarchyError(f"hierarchy {name!r}: level {level} needs at least two cut points")
            outside = [v for v in numbers if not points[0] <= v < points[-1]]
            if outside:
                raise HierarchyError(
                    f"hierarchy {name!r}: values outside level {level}'s intervals "
                    f"[{_format_number(points[0])}, {_format_number(points[-1])}): {_preview(outside)}")
        for level, (finer, coarser) in enumerate(zip(self.cuts, self.cuts[1:]), start=2):
            missing = sorted(set(coarser) - set(finer))
            if missing:
                raise HierarchyError(
                    f"hierarchy {name!r}: level {level}'s cut points {missing} are not cut points of level {level - 1}, "
                    f"so its intervals do not nest")

    def _label(self, level: int, value: float) -> str:
        points = self.cuts[level]
        for lo, hi in zip(points, points[1:]):
            if lo <= value < hi:
                return self._interval(lo, hi)
        raise AssertionError("value outside checked cuts")

    def labels(self, level: int) -> set[str | None]:
        if 1 <= level <= len(self.cuts):
            points = self.cuts[level - 1]
            return {self._interval(lo, hi) for lo, hi in zip(points, points[1:])}
        return super().labels(level)

    def generalize_sql(self, value: exp.Expression, level: int) -> exp.Expression | None:
        if level == 0:
            return None  # the original's text form must match the table's level_0, which a join gives exactly
        if level > len(self.cuts):
            return exp.Case(ifs=[exp.If(this=value.is_(exp.Null()).not_(), true=sb.lit(TOP))])
        points = self.cuts[level - 1]
        # One Case built at once: Case.when copies the expression each call, quadratic in the number of intervals.
        return exp.Case(ifs=[exp.If(this=exp.and_(value >= sb.lit(lo), value < sb.lit(hi)),
                                    true=sb.lit(self._interval(lo, hi)))
                             for lo, hi in zip(points, points[1:])])

    def interval(self, level: int, label: str) -> tuple[float, float]:
        """The bounds of a level's interval, from its label."""
        points = self.cuts[level - 1]
        for lo, hi in zip(points, points[1:]):
            if self._interval(lo, hi) == label:
                return lo, hi
        raise KeyError(f"{label!r} is not an interval of level {level} of hierarchy {self.name!r}")

    def _interval(self, lo: float, hi: float) -> str:
        return half_open_label(self.number_format.text(lo), self.number_format.text(hi))
