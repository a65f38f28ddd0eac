"""The one notation of the ranges duckanon writes as labels, in Python and in SQL.

**Notation.**  Ranges duckanon writes itself are ``[lo, hi]`` (closed: a partition's smallest and largest value) and
``[lo, hi)`` (half-open: an interval hierarchy's bucket, ``lo <= value < hi``).  The numbers of one column are written
alike so that labels sort as text in numeric order: padded with zeros to the same count of integer digits, with the
same count of decimals (the fewest that show every number exactly, at most :data:`MOST_DECIMALS`; numbers with more
are rounded outward, the lower bound down and the upper one up, so the label still contains them), and, when the
column has negative numbers, with a sign place (``-`` for negatives, ``0`` otherwise).  Negative numbers sort before
the others, but among themselves by magnitude: text cannot sort them readably, the bound columns can.  Labels of
hierarchies read from files (ARX) are the user's and stay as they are; they still get bound columns.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlglot import exp

from ..sqlgen import build as sb

MOST_DECIMALS = 6
#: A number within this share of its magnitude of its rounding to MOST_DECIMALS counts as exact (float noise).
_NOISE = 1e-12


# ---------------------------------------------------------------------------------------------- the notation, Python
@dataclass(frozen=True)
class NumberFormat:
    """How the numbers of one column are written: ``digits`` integer digits (zero-padded), ``decimals`` decimals, a
    sign place when ``signed``."""

    digits: int
    decimals: int
    signed: bool

    @classmethod
    def of(cls, numbers: Iterable[float]) -> NumberFormat:
        finite = [_six(n) for n in numbers if math.isfinite(n)]
        if not finite:
            return cls(1, 0, False)
        parts = [format(abs(d), "f").partition(".") for d in finite]
        return cls(max(len(whole) for whole, _, _ in parts),
                   max(len(fraction.rstrip("0")) for _, _, fraction in parts),
                   min(finite) < 0)

    def text(self, number: float) -> str:
        if not math.isfinite(number):
            return "inf" if number > 0 else "-inf"
        rounded = _six(number)
        whole, _, fraction = format(abs(rounded), "f").partition(".")
        sign = "-" if rounded < 0 else "0" if self.signed else ""
        return sign + whole.zfill(self.digits) + ("." + fraction.ljust(MOST_DECIMALS, "0")[:self.decimals]
                                                  if self.decimals else "")


def _six(number: float) -> decimal.Decimal:
    return decimal.Decimal(repr(float(number))).quantize(decimal.Decimal(1).scaleb(-MOST_DECIMALS)) + 0


def closed_label(low: str, high: str) -> str:
    return f"[{low}, {high}]"


def half_open_label(low: str, high: str) -> str:
    return f"[{low}, {high})"


# ------------------------------------------------------------------------------------------------- the notation, SQL
def _scaled(value: exp.Expression, direction: str) -> exp.Expression:
    """``value`` as DECIMAL(38, 6), rounded outward (``down`` or ``up``) when it has more decimals than that."""
    fixed = exp.cast(value.copy(), exp.DataType.build(f"DECIMAL(38, {MOST_DECIMALS})"))
    noise = sb.lit(_NOISE) * exp.func("GREATEST", sb.lit(1), exp.func("ABS", sb.as_double(value.copy())))
    step = exp.cast(exp.Literal.number(f"{10.0 ** -MOST_DECIMALS:.{MOST_DECIMALS}f}"),
                    exp.DataType.build(f"DECIMAL(38, {MOST_DECIMALS})"))
    if direction == "down":
        beyond = sb.as_double(fixed.copy()) - sb.as_double(value.copy()) > noise
        return exp.Case(ifs=[exp.If(this=beyond, true=fixed.copy() - step)], default=fixed)
    beyond = sb.as_double(value.copy()) - sb.as_double(fixed.copy()) > noise
    return exp.Case(ifs=[exp.If(this=beyond, true=fixed.copy() + step)], default=fixed)


def _parts(scaled: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
    """The integer digits and the six decimals of a DECIMAL(38, 6)'s magnitude, as text."""
    text = sb.as_text(exp.func("ABS", scaled))
    return exp.func("SPLIT_PART", text, sb.lit("."), sb.lit(1)), exp.func("SPLIT_PART", text.copy(), sb.lit("."),
                                                                          sb.lit(2))


@dataclass(frozen=True)
class SqlNumberFormat:
    """:class:`NumberFormat` as SQL expressions."""

    digits: exp.Expression
    decimals: exp.Expression
    signed: exp.Expression

    @classmethod
    def of_bounds(cls, low: exp.Expression, high: exp.Expression) -> SqlNumberFormat:
        """The format of every row's ``low`` (rounded down) and ``high`` (rounded up): window aggregates over all rows
        of the query they appear in, so that every label of a column is written alike."""
        def most(measure: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
            widest = exp.func("GREATEST", measure(_scaled(low, "down")), measure(_scaled(high, "up")))
            return exp.cast(exp.func("COALESCE", exp.Window(this=exp.func("MAX", widest)), sb.lit(0)),
                            exp.DataType.build("INTEGER"))

        digits = most(lambda s: exp.func("LENGTH", _parts(s)[0]))
        decimals = most(lambda s: exp.func("LENGTH", exp.Trim(this=_parts(s)[1], expression=sb.lit("0"),
                                                              position="TRAILING")))
        signed = exp.func("COALESCE", exp.Window(this=exp.func("MIN", low.copy())) < sb.lit(0), exp.false())
        return cls(digits, decimals, signed)

    def text(self, value: exp.Expression, direction: str) -> exp.Expression:
        """``value`` written in this format, rounded ``down`` or ``up`` beyond six decimals."""
        scaled = _scaled(value, direction)
        whole, fraction = _parts(scaled)
        sign = exp.Case(ifs=[exp.If(this=scaled.copy() < sb.lit(0), true=sb.lit("-")),
                             exp.If(this=self.signed.copy(), true=sb.lit("0"))], default=sb.lit(""))
        padded = exp.func("LPAD", whole, self.digits.copy(), sb.lit("0"))
        decimals = exp.Case(ifs=[exp.If(this=self.decimals.copy() > sb.lit(0), true=exp.Concat(
            expressions=[sb.lit("."), exp.func("LEFT", fraction, self.decimals.copy())], safe=False))],
                            default=sb.lit(""))
        return exp.Concat(expressions=[sign, padded, decimals], safe=False)

    def closed(self, low: exp.Expression, high: exp.Expression) -> exp.Expression:
        """``[low, high]``."""
        return exp.Concat(expressions=[sb.lit("["), self.text(low, "down"), sb.lit(", "), self.text(high, "up"),
                                       sb.lit("]")], safe=False)


_CLOSED = re.compile(r"^\[(-?[0-9]+(?:\.([0-9]+))?), (-?[0-9]+(?:\.([0-9]+))?)\]$")


def parse_closed(label: str) -> tuple[float, float, int] | None:
    """The numbers of a ``[lo, hi]`` label and how many decimals it shows, or None when it is not one."""
    match = _CLOSED.match(label)
    if match is None:
        return None
    low, low_decimals, high, high_decimals = match.groups()
    return float(low), float(high), len(low_decimals or high_decimals or "")


_HALF_OPEN = re.compile(r"^\[(-?[0-9]+(?:\.[0-9]+)?), (-?[0-9]+(?:\.[0-9]+)?)\)$")
_NUMBER = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$")


def in_notation(label: str) -> bool:
    """Whether ``label`` is written in duckanon's notation (a range, an interval or a number), so that
    :func:`label_problem` can judge its bounds."""
    return bool(parse_closed(label) or _HALF_OPEN.match(label) or _NUMBER.match(label.strip()))


def label_problem(label: str, low: float, high: float) -> str | None:
    """What is wrong with the bounds ``[low, high]`` shown beside ``label``, judged from the label alone: a ``[lo,
    hi]`` range must show its own numbers, a ``[lo, hi)`` interval must contain them, a plain number must be both
    bounds.  None when they agree, or when the label is not in duckanon's notation (a user's hierarchy label)."""
    closed = parse_closed(label)
    if closed is not None:
        if close_to(low, closed[0], closed[2]) and close_to(high, closed[1], closed[2]):
            return None
        return f"{label!r} shows the bounds [{low}, {high}]"
    half_open = _HALF_OPEN.match(label)
    if half_open is not None:
        lowest, above = (float(n) for n in half_open.groups())
        return None if lowest <= low <= high < above else f"{label!r} shows the bounds [{low}, {high}], outside it"
    if _NUMBER.match(label.strip()):
        return None if low == high == float(label) else f"{label!r} shows the bounds [{low}, {high}]"
    return None


def close_to(number: float, target: float, decimals_shown: int) -> bool:
    """Whether ``number`` is what a label showing ``target`` with ``decimals_shown`` decimals stands for: equal, or
    (rounded beyond :data:`MOST_DECIMALS`) within one step of it."""
    if decimals_shown < MOST_DECIMALS:
        return math.isclose(number, target, rel_tol=_NOISE, abs_tol=0.0) or number == target
    return abs(number - target) <= 10.0 ** -MOST_DECIMALS * (1 + 1e-6) + _NOISE * max(1.0, abs(target))
