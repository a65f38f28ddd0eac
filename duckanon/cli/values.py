"""Parsers of option values, used as argparse ``type=``: a value that does not parse is a usage error naming the
option and the value, before any work starts."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import PolicyError
from ..recode import protect
from ..recode.protect import Mask


def number(text: str) -> float:
    """A finite number (NaN and infinities are not parameters of anything)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive(text: str) -> float:
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def positive_whole(text: str) -> int:
    value = whole(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def count(text: str) -> int:
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (a whole number >= 0)")
    return value


# Byte units, decimal and binary, as people write them after a number (2GB, 1.5 GiB, 500mb).
_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20,
               "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*")


def byte_size(text: str) -> int:
    """A number of bytes: ``2GB``, ``1.5 GiB``, ``500MB`` or ``2000000000``."""
    match = _SIZE.fullmatch(text)
    if not match or match[2].lower() not in _BYTE_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: a number of bytes, or one followed by KB, MB, GB "
                                         f"or TB")
    return int(number(match[1]) * _BYTE_UNITS[match[2].lower()])


def share(text: str) -> float:
    value = number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1")
    return value


def column_values(form: str, *kinds: Callable[[str], object]) -> Callable[[str], tuple]:
    """A parser of ``COLUMN:V1[:V2…]`` (``form`` shows it in errors): the column, then each value by its kind.  The
    values are split off from the right, so a column name may hold a colon."""

    def parse(text: str) -> tuple:
        parts = text.rsplit(":", len(kinds))
        if len(parts) != len(kinds) + 1 or not parts[0]:
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
        try:
            return (parts[0], *(kind(part) for kind, part in zip(kinds, parts[1:])))
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None

    return parse


def column_number_variant(form: str, variants: Sequence[str]) -> Callable[[str], tuple[str, float, str]]:
    """A parser of ``COLUMN:NUMBER`` or ``COLUMN:NUMBER:VARIANT`` into (column, number, variant), the variant the
    first of ``variants`` when none is written."""

    def parse(text: str) -> tuple[str, float, str]:
        head, _, last = text.rpartition(":")
        if last in variants:
            column, value = column_values(form, number)(head)
            return column, value, last
        column, value = column_values(form, number)(text)
        return column, value, variants[0]

    return parse


def k_map(text: str) -> tuple[int, int | None, float, str]:
    """``K[:POPULATION[:SIGNIFICANCE[:ESTIMATOR]]]`` into (k, population size or None, significance, estimator)."""
    form = "K[:POPULATION[:SIGNIFICANCE[:zero-truncated-poisson|poisson]]]"
    parts = text.split(":")
    if not 1 <= len(parts) <= 4:
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    try:
        k = positive_whole(parts[0])
        population = positive_whole(parts[1]) if len(parts) > 1 else None
        significance = number(parts[2]) if len(parts) > 2 else 0.01
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None
    return k, population, significance, parts[3] if len(parts) > 3 else "zero-truncated-poisson"


def differential_privacy(text: str) -> tuple[float, float, int, float | None]:
    """``EPSILON:DELTA[:STEPS[:SEARCH_EPSILON]]`` into (ε, δ, steps, the search's ε or None for its default)."""
    form = "EPSILON:DELTA[:STEPS[:SEARCH_EPSILON]]"
    parts = text.split(":")
    if not 2 <= len(parts) <= 4:
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    try:
        return (number(parts[0]), number(parts[1]), positive_whole(parts[2]) if len(parts) > 2 else 100,
                number(parts[3]) if len(parts) > 3 else None)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None


def pair_with_flag(form: str, kind: Callable[[str], float], flag: str) -> Callable[[str], tuple[float, float, bool]]:
    """A parser of ``A:B[:flag]`` (``form``), A and B read by ``kind``, into (A, B, whether the flag is given)."""
    def parse(text: str) -> tuple[float, float, bool]:
        parts = text.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != flag):
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
        try:
            return kind(parts[0]), kind(parts[1]), len(parts) == 3
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None
    return parse


# MIN:MAX[:arx]: two shares, and whether ARX's size-first order is asked
delta_presence = pair_with_flag("MIN:MAX[:arx]", share, "arx")
# GAIN:COST[:journalist]: and whether the attacker is a journalist (else a prosecutor)
no_attack = pair_with_flag("GAIN:COST[:journalist]", number, "journalist")


def average_risk(text: str) -> tuple[float, float | None, float | None]:
    """``SHARE[:HIGHEST:RECORDS]`` into (average risk, highest risk or None, share of records at risk or None)."""
    form = "SHARE[:HIGHEST:RECORDS]"
    parts = text.split(":")
    if len(parts) not in (1, 3):
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    try:
        shares = [share(part) for part in parts]
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None
    return (shares[0], None, None) if len(shares) == 1 else (shares[0], shares[1], shares[2])


def population_uniqueness(text: str) -> tuple[float, int, str]:
    """``SHARE:POPULATION[:ESTIMATOR]`` into (share, population size, estimator; Dankar's rule unless given)."""
    form = "SHARE:POPULATION[:dankar|pitman|zayatz|snb]"
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    try:
        return share(parts[0]), positive_whole(parts[1]), parts[2] if len(parts) == 3 else "dankar"
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None


def _cost_benefit(text: str, flag: str) -> tuple[dict[str, float], bool]:
    """``COST:GAIN:LOSS:BENEFIT[:flag]``, four numbers (ARX's cost-benefit configuration, which the model or metric
    checks), and whether ``flag`` follows them."""
    form = f"COST:GAIN:LOSS:BENEFIT[:{flag}]"
    parts = text.split(":")
    flagged = len(parts) == 5 and parts[4] == flag
    if len(parts) != 4 + flagged:
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    names = ("adversary_cost", "adversary_gain", "publisher_loss", "publisher_benefit")
    try:
        figures = [number(part) for part in parts[:4]]
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None
    return dict(zip(names, figures)), flagged


def cost_benefit(text: str) -> tuple[dict[str, float], bool]:
    """``COST:GAIN:LOSS:BENEFIT[:journalist]`` into ARX's cost-benefit configuration and whether the attacker is a
    journalist (else a prosecutor)."""
    return _cost_benefit(text, "journalist")


t_closeness = column_number_variant("COLUMN:T[:ordered]", ("equal", "ordered"))
beta_likeness = column_number_variant("COLUMN:BETA[:enhanced]", ("basic", "enhanced"))
entropy_l = column_number_variant("COLUMN:L[:grassberger]", ("shannon", "grassberger"))


def assignments(form: str, kind: Callable[[str], object] = str) -> Callable[[str], dict]:
    """A parser of ``NAME=VALUE,NAME=VALUE…`` into a dict."""

    def parse(text: str) -> dict:
        result = {}
        for item in text.split(","):
            name, sep, value = item.partition("=")
            if not sep or not name or not value:
                raise argparse.ArgumentTypeError(f"expected {form}, got {item!r}" + (f" in {text!r}" if item != text
                                                                                      else ""))
            try:
                result[name] = kind(value)
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{error} for {name!r} (expected {form})") from None
        return result

    return parse


levels = assignments("COLUMN=LEVEL,…", whole)


def named_list(form: str) -> Callable[[str], tuple[str, list[str]]]:
    """A parser of ``NAME=V1,V2,…`` into the name and the list of values."""

    def parse(text: str) -> tuple[str, list[str]]:
        name, sep, values = text.partition("=")
        if not sep or not name or not values:
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
        return name, values.split(",")

    return parse


def numbers(text: str) -> list[float]:
    """``5,10,20``."""
    return [number(part) for part in text.split(",")]


def number_pair(text: str) -> tuple[float, float]:
    """``LOW:HIGH``."""
    parts = text.split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH, got {text!r}")
    return number(parts[0]), number(parts[1])


def names(text: str) -> list[str]:
    """``A,B,C``: names, none empty."""
    parts = text.split(",")
    if not all(parts):
        raise argparse.ArgumentTypeError(f"expected A,B,…, got {text!r}")
    return parts


def column_file(text: str) -> tuple[str, Path | None]:
    """``COLUMN`` or ``COLUMN=FILE``."""
    column, sep, file = text.partition("=")
    if not column or (sep and not file):
        raise argparse.ArgumentTypeError(f"expected COLUMN or COLUMN=FILE.csv, got {text!r}")
    return column, Path(file) if file else None


def _method(text: str, form: str, build: Callable[[str], object]) -> tuple[str, object]:
    column, sign, spec = text.partition("=")
    if not column or not sign or not spec:
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    try:
        return column, build(spec)
    except (PolicyError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r} (expected {form})") from None


def mask(text: str) -> tuple[str, Mask]:
    """``COLUMN=email-domain``, ``COLUMN=keep-last:N``, ``COLUMN=keep-first:N`` or ``COLUMN=regex:REGEX:GROUPS``."""

    def build(spec: str) -> Mask:
        kind, _, rest = spec.partition(":")
        if kind == "email-domain" and not rest:
            return Mask.email_domain()
        if kind in ("keep-last", "keep-first"):
            return (Mask.keep_last if kind == "keep-last" else Mask.keep_first)(int(rest))
        if kind == "regex":
            pattern, _, groups = rest.rpartition(":")
            return Mask(pattern, tuple(int(g) for g in groups.split(",")))
        raise ValueError(f"unknown mask {spec!r}")

    return _method(text, "COLUMN=email-domain|keep-last:N|keep-first:N|regex:REGEX:GROUPS", build)


def date_shift(text: str) -> tuple[str, tuple[int, str | None]]:
    """``COLUMN=DAYS[:BY]``: the window and the column naming each date's person (by default --person; the key
    comes apart)."""

    def build(spec: str) -> tuple[int, str | None]:
        days, _, by = spec.partition(":")
        return int(days), by or None

    return _method(text, "COLUMN=DAYS[:BY]", build)


def key_source(text: str) -> str:
    try:
        return protect.key_source(text, "--pseudonym-key")
    except PolicyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
