"""Column methods beside generalization: pseudonyms, masks and date shifts.

A policy may release a column transformed instead of dropping it: ``pseudonymize`` replaces each value by its keyed
HMAC-SHA-256 (hex), so one value gives one pseudonym in every column, table and release made with the same key and
none can be linked across keys; ``mask`` keeps the parts of a value a pattern's groups capture and replaces the rest;
``date_shift`` moves every date of one person (the values of a ``by`` column) by the same offset drawn from a window,
so intervals between one person's events survive.  These columns are not quasi-identifiers: no class is formed by
them.

The methods compile to SQL over the recoded records (:func:`protected`).  The key enters SQL only as the HMAC's two
padded blocks in a one-row table registered on the engine for the time of the statement: never as text of a
statement, so no query text, plan, log or error can show it, and never in a release or its info, which name only where
the key came from.  Without a declared key source, each release draws a random key and forgets it.

HMAC (RFC 2104) over SHA-256 in SQL: ``SHA256((K' xor opad) || UNHEX(SHA256((K' xor ipad) || message)))`` with K' the
key zero-padded to 64 bytes (hashed first when longer), which ``openssl dgst -sha256 -hmac`` and Python's ``hmac``
compute alike (tested).  The message is the UTF-8 of the value's text form.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import PolicyError
from ..parameters import checked_number
from ..sqlgen import build as sb

MINIMUM_KEY_BYTES = 32
_BLOCK = 64  # SHA-256's block size, which HMAC pads the key to
_DATE_SHIFT_LABEL = b"duckanon date shift"
_HEX_DIGITS = "0123456789abcdef"
_OFFSET_HEX_DIGITS = 8  # 32 bits of the keyed hash draw the offset: the modulo's bias is below window / 2**32
_KEY_SCHEMES = ("env", "file")
# The types a whole number of days is added to exactly.  Not TIMESTAMP_NS: DuckDB before 2.0 (1.2, 1.5 measured)
# returns its sum with an interval in microseconds, losing the nanoseconds.
_DATE_TYPES = ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP_S", "TIMESTAMP_MS")


def key_source(declared: str | None, parameter: str) -> str | None:
    """``declared`` checked as a key source: ``env:NAME`` (an environment variable) or ``file:PATH``, or None (a
    random key per release)."""
    if declared is None:
        return None
    scheme, _, where = declared.partition(":") if isinstance(declared, str) else ("", "", "")
    if scheme not in _KEY_SCHEMES or not where:
        raise PolicyError(f"{parameter} must be 'env:NAME' or 'file:PATH' (where the secret key is), got "
                          f"{declared!r}")
    return declared


def _read_key(source: str) -> bytes:
    """The secret bytes at ``source`` (an environment variable's UTF-8, or a file's bytes without one trailing line
    break, as ``openssl rand -hex 32 > key`` leaves one); errors name the source and the length, never the key."""
    scheme, _, where = source.partition(":")
    if scheme == "env":
        if where not in os.environ:
            raise PolicyError(f"the pseudonym key's environment variable {where!r} is not set")
        key = os.environ[where].encode("utf-8")
    else:
        try:
            key = Path(where).read_bytes()
        except OSError as error:
            raise PolicyError(f"the pseudonym key file {where!r} cannot be read: {error.strerror}") from None
        key = key[:-2] if key.endswith(b"\r\n") else key[:-1] if key.endswith(b"\n") else key
    if len(key) < MINIMUM_KEY_BYTES:
        raise PolicyError(f"the pseudonym key from {source!r} has {len(key)} bytes; at least {MINIMUM_KEY_BYTES} "
                          f"are needed (e.g. `openssl rand -hex 32`)")
    return key


def hmac_sha256_hex(key: bytes, message: bytes) -> str:
    """What the SQL computes, for callers who hold the key (a custodian re-linking a pseudonym)."""
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _pads(key: bytes) -> tuple[bytes, bytes]:
    padded = (hashlib.sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in padded), bytes(b ^ 0x5C for b in padded)


class ColumnMethod(ABC):
    """How one released column is transformed; ``role`` is its policy role."""

    role: str
    # What the method's key is derived for (HMAC of the key over this label), so that one key serves several methods
    # without one's hashes revealing another's; None: the key itself.
    key_purpose: bytes | None = None

    @abstractmethod
    def expression(self, column: exp.Expression, keys: _KeyColumns, read: Mapping[str, exp.Expression],
                   type_name: str) -> exp.Expression:
        """The released value of ``column`` (of engine type ``type_name``), reading the other columns as ``read``
        and the keys' pads through ``keys``."""

    @abstractmethod
    def params(self) -> dict:
        """The method's parameters as stored in the catalog and recorded in a release's info (never a key)."""

    def key_sources(self) -> list[str | None]:
        """The key sources the method hashes with (None: the release's random key)."""
        return []

    def reads(self) -> list[str]:
        """Other source columns the method reads."""
        return []

    def check_types(self, column: str, type_name: str) -> None:
        """PolicyError when the method cannot transform a column of this type."""


@dataclass(frozen=True)
class Pseudonymize(ColumnMethod):
    """Each value replaced by the hex HMAC-SHA-256 of its text under the key at ``key`` (``env:NAME`` or
    ``file:PATH``, at least 32 bytes), or under a random key drawn for the release when ``key`` is None."""

    key: str | None = None
    role = "pseudonymize"

    def __post_init__(self):
        key_source(self.key, "Pseudonymize(key=...)")

    def expression(self, column, keys, read, type_name):
        return keys.hmac_hex(self.key, _utf8(column), self.key_purpose)

    def params(self):
        return {"method": "HMAC-SHA-256", "key": self.key or "random, discarded"}

    def key_sources(self):
        return [self.key]


@dataclass(frozen=True)
class Mask(ColumnMethod):
    """The value's text matched as a whole by ``pattern``: the groups listed in ``keep`` (numbered from 1) show as
    they are, every other group as ``padding``, and text outside the groups is left out; a value the pattern does not
    match shows as ``padding`` alone.  The presets cover the usual cases: :meth:`email_domain`,
    :meth:`keep_last`, :meth:`keep_first`."""

    pattern: str
    keep: tuple[int, ...]
    padding: str = "*"
    role = "mask"

    def __post_init__(self):
        if not isinstance(self.pattern, str):
            raise PolicyError(f"Mask's pattern must be a regular expression, got {self.pattern!r}")
        try:
            groups = re.compile(self.pattern).groups
        except re.error as error:
            raise PolicyError(f"Mask pattern {self.pattern!r} is not a regular expression: {error}") from None
        keep = tuple(self.keep) if not isinstance(self.keep, int) else (self.keep,)
        object.__setattr__(self, "keep", keep)
        if not keep or any(isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= groups for g in keep):
            raise PolicyError(f"Mask keep must name groups of the pattern {self.pattern!r} (1 to {groups}), "
                              f"got {list(keep)}")
        if set(keep) == set(range(1, groups + 1)):
            raise PolicyError(f"Mask pattern {self.pattern!r} keeps every group: it would keep the whole value")
        if not isinstance(self.padding, str) or not self.padding:
            raise PolicyError(f"Mask padding must be a non-empty text, got {self.padding!r}")

    @classmethod
    def email_domain(cls, padding: str = "*") -> Mask:
        """``jane@example.org`` → ``*@example.org``."""
        return cls(r"([^@]+)(@[^@]+)", (2,), padding)

    @classmethod
    def keep_last(cls, characters: int, padding: str = "*") -> Mask:
        """The last ``characters`` characters (a phone number's last digits); shorter values fully masked."""
        return cls(rf"(.+)(.{{{checked_number(characters, 'characters', 'Mask.keep_last', whole=True, low=1)}}})", (2,), padding)

    @classmethod
    def keep_first(cls, characters: int, padding: str = "*") -> Mask:
        """The first ``characters`` characters; shorter values fully masked."""
        return cls(rf"(.{{{checked_number(characters, 'characters', 'Mask.keep_first', whole=True, low=1)}}})(.+)", (1,), padding)

    @property
    def groups(self) -> int:
        return re.compile(self.pattern).groups

    @property
    def anchored(self) -> str:
        return f"^(?:{self.pattern})$"

    def expression(self, column, keys, read, type_name):
        text = sb.as_text(column)
        pattern = sb.lit(self.anchored)
        parts = [exp.RegexpExtract(this=text.copy(), expression=pattern.copy(), group=sb.lit(g)) if g in self.keep
                 else sb.lit(self.padding) for g in range(1, self.groups + 1)]
        shown = sb.concatenated(parts)
        return (exp.Case().when(column.copy().is_(exp.Null()), exp.cast(exp.Null(), "VARCHAR"))
                .when(exp.RegexpLike(this=text.copy(), expression=pattern.copy()), shown)
                .else_(sb.lit(self.padding)))

    def wholly_kept(self, column: exp.Expression) -> exp.Expression:
        """Whether a value's kept groups are the whole value (the pattern would keep it all)."""
        text = sb.as_text(column)
        pattern = sb.lit(self.anchored)
        kept = [exp.RegexpExtract(this=text.copy(), expression=pattern.copy(), group=sb.lit(g)) for g in self.keep]
        return exp.and_(exp.RegexpLike(this=text.copy(), expression=pattern.copy()),
                        sb.concatenated(kept).eq(text.copy()))

    def params(self):
        return {"pattern": self.pattern, "keep": list(self.keep), "padding": self.padding}


@dataclass(frozen=True)
class DateShift(ColumnMethod):
    """Every date of one person moved by the same whole number of days in [-days, days], the person being the value
    of column ``by`` (by default the policy's person column); the offset is drawn from the keyed hash of that value (``key`` as :class:`Pseudonymize`'s), so
    every date column and table of a release shifts one person alike.  The column keeps its type."""

    days: int
    by: str | None = None  # None: the person column of the policy (Policy(person=...))
    key: str | None = None
    role = "date-shift"
    key_purpose = _DATE_SHIFT_LABEL

    def __post_init__(self):
        checked_number(self.days, "days", "DateShift", whole=True, low=1)
        if self.by is not None and (not isinstance(self.by, str) or not self.by):
            raise PolicyError(f"DateShift by must name the column whose values are people, got {self.by!r}")
        key_source(self.key, "DateShift(key=...)")

    def expression(self, column, keys, read, type_name):
        digest = keys.hmac_hex(self.key, _utf8(read[self.by]), self.key_purpose)
        drawn = None
        for position in range(_OFFSET_HEX_DIGITS):
            # Trees built by hand carry no precedence: every step is parenthesized.
            # BIGINT: 32 bits overflow Spark's INT.
            digit = exp.cast(exp.Sub(this=exp.StrPosition(this=sb.lit(_HEX_DIGITS), substr=exp.Substring(
                this=digest.copy(), start=sb.lit(position + 1), length=sb.lit(1))), expression=sb.lit(1)), "BIGINT")
            drawn = digit if drawn is None else exp.Paren(this=exp.Add(
                this=exp.Mul(this=drawn, expression=sb.lit(16)), expression=digit))
        offset = exp.Sub(this=exp.Paren(this=exp.Mod(this=drawn, expression=sb.lit(2 * self.days + 1))),
                         expression=sb.lit(self.days))
        # One day times the offset: Spark takes no expression inside INTERVAL, and both engines multiply one.
        day = exp.Interval(this=sb.lit("1"), unit=exp.var("DAY"))
        shifted = exp.Add(this=column.copy(), expression=exp.Paren(this=exp.Mul(this=day, expression=exp.Paren(this=offset))))
        return exp.cast(shifted, exp.DataType.build(type_name, dialect=sb.DIALECT))

    def params(self):
        return {"days": self.days, "by": self.by, "key": self.key or "random, discarded"}

    def key_sources(self):
        return [self.key]

    def reads(self):
        return [self.by]

    def check_types(self, column, type_name):
        if type_name.upper() == "TIMESTAMP_NS":
            raise PolicyError(f"date_shift column {column!r} is TIMESTAMP_NS, whose nanoseconds shifting would lose "
                              f"on DuckDB before 2.0; cast it to TIMESTAMP first")
        if type_name.upper() not in _DATE_TYPES:
            raise PolicyError(f"date_shift column {column!r} is {type_name}, not a date or timestamp")


METHODS = {"pseudonymize": Pseudonymize, "mask": Mask, "date-shift": DateShift}


def method_from_params(role: str, params: Mapping) -> ColumnMethod:
    """A method from its role and stored parameters (:meth:`ColumnMethod.params`)."""
    if role not in METHODS:
        raise PolicyError(f"unknown column method {role!r}; known: {sorted(METHODS)}")
    params = dict(params)
    if params.get("key") == "random, discarded":
        params["key"] = None
    params.pop("method", None)
    if role == "mask" and "keep" in params:
        params["keep"] = tuple(params["keep"])
    try:
        return METHODS[role](**params)
    except TypeError as error:
        raise PolicyError(f"{role}: {error}") from None


def method_text(role: str, params: Mapping) -> str:
    """A method as a report shows it, from its recorded parameters."""
    if role == "pseudonymize":
        return f"keyed HMAC-SHA-256 (key: {params.get('key') or 'random, discarded'})"
    if role == "mask":
        return (f"pattern {params.get('pattern')!r}, groups {params.get('keep')} shown, the rest as "
                f"{params.get('padding')!r}")
    if role == "date-shift":
        return (f"every date of one {params.get('by')} moved by one offset within ±{params.get('days')} days "
                f"(key: {params.get('key') or 'random, discarded'})")
    return ""


def _utf8(value: exp.Expression) -> exp.Expression:
    return exp.Encode(this=sb.as_text(value.copy()), charset=sb.lit("utf-8"))


class _KeyColumns:
    """The pads of each key a statement hashes with, as columns of a registered one-row table aliased ``alias``."""

    def __init__(self, alias: str, indices: Mapping[tuple[str | None, bytes | None], int]):
        self.alias, self.indices = alias, indices

    def hmac_hex(self, source: str | None, message: exp.Expression, purpose: bytes | None) -> exp.Expression:
        i = self.indices[(source, purpose)]
        inner = exp.SHA2(this=exp.DPipe(this=sb.col(f"ipad_{i}", self.alias), expression=message),
                         length=sb.lit(256))
        return exp.SHA2(this=exp.DPipe(this=sb.col(f"opad_{i}", self.alias), expression=exp.Unhex(this=inner)),
                        length=sb.lit(256))


_KEYS_ALIAS = "__duckanon_keys"


def check_methods(engine: Engine, source: exp.Expression, methods: Mapping[str, ColumnMethod]) -> None:
    """PolicyError, before any work, when a method cannot transform its column's type, a declared key cannot be read
    or is too short, a mask would keep some value of ``source`` whole, or a date shift's person is missing in some
    record (the count is named, never a value)."""
    if not methods:
        return
    types = engine.types(source)
    for column, method in methods.items():
        method.check_types(column, types[column])
        for declared in method.key_sources():
            if declared is not None:
                _read_key(declared)
    masks = {c: m for c, m in methods.items() if isinstance(m, Mask)}
    shifts = {c: m for c, m in methods.items() if isinstance(m, DateShift)}
    if not masks and not shifts:
        return
    conditions = [m.wholly_kept(sb.col(c)) for c, m in masks.items()]
    conditions += [sb.col(m.by).is_(exp.Null()) for m in shifts.values()]
    found = engine.rows(exp.select(*[exp.Filter(this=exp.func("COUNT", exp.Star()), expression=exp.Where(this=c))
                                     for c in conditions]).from_(sb.derived(source, "s")))[0]
    for (column, mask), kept in zip(masks.items(), found):
        if kept:
            raise PolicyError(f"mask of {column!r}: the pattern {mask.pattern!r} would keep {kept} values whole; "
                              f"use one whose masked groups cannot be empty, such as '(.+)(.{{4}})'")
    for (column, shift), missing in zip(shifts.items(), found[len(masks):]):
        if missing:
            raise PolicyError(f"date_shift of {column!r} is by {shift.by!r}, which is NULL in {missing} records: "
                              f"each date needs its person")


@contextlib.contextmanager
def protected(engine: Engine, relation: exp.Expression, columns: Sequence[str],
              methods: Mapping[str, ColumnMethod], carried: Mapping[str, str] | None = None
              ) -> Iterator[exp.Expression]:
    """``columns`` of ``relation`` with each column of ``methods`` transformed, as a query valid while the context
    lasts (the keys' pads are registered on ``engine`` until then); ``relation`` as it is when no method applies and
    nothing is carried.  ``relation`` must also hold the columns the methods read (:meth:`ColumnMethod.reads`);
    ``carried`` adds columns of ``relation`` untransformed, under new names (name → column)."""
    applied = {c: m for c, m in methods.items() if c in columns}
    carried = dict(carried or {})
    if not applied and not carried:
        yield relation
        return
    extra = [sb.col(column, "r").as_(name, quoted=True) for name, column in carried.items()]
    if not applied:
        yield exp.select(*[sb.col(c, "r") for c in columns], *extra).from_(sb.derived(relation, "r"))
        return
    types = engine.types(relation)
    random_key = None
    needed = {(source, m.key_purpose) for m in applied.values() for source in m.key_sources()}
    pads: dict[str, bytes] = {}
    indices = {}
    for i, (source, purpose) in enumerate(sorted(needed, key=lambda p: (p[0] or "", p[1] or b""))):
        if source is None:
            random_key = random_key or secrets.token_bytes(MINIMUM_KEY_BYTES)
            key = random_key
        else:
            key = _read_key(source)
        if purpose is not None:
            key = hmac.new(key, purpose, hashlib.sha256).digest()
        pads[f"ipad_{i}"], pads[f"opad_{i}"] = _pads(key)
        indices[(source, purpose)] = i
    keys = _KeyColumns(_KEYS_ALIAS, indices)
    read = {c: sb.col(c, "r") for c in types}
    projection = [applied[c].expression(sb.col(c, "r"), keys, read, types[c]).as_(c, quoted=True) if c in applied
                  else sb.col(c, "r") for c in columns]
    with engine.registered(pd.DataFrame({name: [pad] for name, pad in pads.items()})) as table:
        yield (exp.select(*projection, *extra).from_(sb.derived(relation, "r"))
               .join(exp.alias_(table, _KEYS_ALIAS, quoted=True), join_type="CROSS"))
