"""The one check of numeric parameters (privacy models, clustering and perturbation methods).

A parameter that slips through as NaN, ±inf or a bool surfaces much later, far from its cause (a NaN ``l`` once became
a DuckDB binder error about a column called "nan"), so every constructor checks its numbers here, at once, with an
error that names the model or method, the parameter and the value.
"""

from __future__ import annotations

import math
import numbers

from .errors import PolicyError


def checked_number(value: object, parameter: str, owner: str, *, whole: bool = False, low: float | None = None,
                   high: float | None = None, low_open: bool = False, high_open: bool = False,
                   note: str = "") -> int | float:
    """``value`` as a plain int or float when it is a finite real number (a whole one with ``whole``) within the
    bounds (``low`` and ``high``, inclusive unless ``low_open``/``high_open``); otherwise PolicyError naming ``owner`` (the model or
    method), ``parameter`` and the value, with ``note`` appended.  Bools, NaN and ±inf are never accepted; a whole
    number must be an integer type (2.0 is refused, as a float may be a mistyped share)."""
    ok = isinstance(value, numbers.Integral if whole else numbers.Real) and not isinstance(value, bool) and (
        whole or _finite_float(value))
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise PolicyError(f"{owner}: {parameter} must {_wanted(whole, low, high, low_open, high_open)}, "
                          f"got {value!r}{f' ({note})' if note else ''}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)  # plain Python numbers, as given


def _finite_float(value: numbers.Real) -> bool:
    """Whether a real number is a finite float (an int too large for a float is not: the methods compute with it)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _wanted(whole: bool, low, high, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"lie in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    kind = "whole number" if whole else "number"
    if low is None:
        return f"be a finite {kind}" + (f" {'below' if high_open else 'of at most'} {high:g}" if high is not None else "")
    if low_open:
        return f"be a positive {kind}" if low == 0 else f"be a {kind} above {low:g}"
    return f"be a {kind} of at least {low:g}"
