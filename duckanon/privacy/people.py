"""People, not records: how exposed each person is when one person has several records.

A class of k records may hold one person's k visits; and a person whose records fall in classes {A, B} is singled
out when nobody else has records in both, however large A and B are.  So, over a relation whose rows carry a person
column:

- a person's **signature** is the set of classes (combinations of quasi-identifier values) their records fall in;
- a class's **people** are the distinct persons with a record in it;
- a person is **exposed at k** when fewer than k people (themself included) share their signature.  If every
  signature is shared by k people or more, every class holds k people or more too (each of its people brings a
  signature group of k into it).

Everything is counted in SQL over the relation (set-based; the same trees run on Spark): a class's key is the text of
its values, each prefixed by its length (NULL as ``-``), so that keys, and the sorted concatenation of a person's
distinct keys that is their signature, are equal exactly when the classes are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..engine import Engine
from ..errors import PolicyError
from ..parameters import checked_number
from ..sqlgen import build as sb

_PERSON, _KEY, _SIGNATURE, _PEOPLE = "__person", "__class_key", "__signature", "__people"


@dataclass(frozen=True)
class PersonExposure:
    """The people of a relation at ``k``: how many hold records, how many fall in a class of fewer than k people,
    how many have a signature fewer than k people share, and how many have one nobody else has."""

    k: int
    records: int
    people: int
    classes: int
    signatures: int
    people_in_small_classes: int
    people_below_k: int
    unique_people: int
    smallest_signature_group: int

    def summary(self) -> str:
        return (f"{self.people:,} people with {self.records:,} records in {self.classes:,} classes: "
                f"{self.people_in_small_classes:,} in a class of fewer than {self.k} people, "
                f"{self.people_below_k:,} whose signature fewer than {self.k} people share "
                f"({self.unique_people:,} unique)")


def class_key(quasi: Sequence[str], table: str | None = None) -> exp.Expression:
    """An injective text of a record's class: each quasi-identifier's text prefixed by its length, NULL as ``-``."""
    parts = []
    for column in quasi:
        text = sb.as_text(sb.col(column, table))
        parts.append(exp.Coalesce(this=exp.DPipe(this=exp.DPipe(
            this=sb.as_text(exp.Length(this=text.copy())), expression=sb.lit(":")), expression=text),
            expressions=[sb.lit("-")]))
    key = parts[0]
    for part in parts[1:]:
        key = exp.DPipe(this=key, expression=part)
    return key


def _keyed(relation: exp.Expression, quasi: Sequence[str], person: str) -> exp.Select:
    return exp.select(sb.col(person).as_(_PERSON, quoted=True), class_key(quasi).as_(_KEY, quoted=True)).from_(
        sb.derived(relation, "r"))


def signatures(relation: exp.Expression, quasi: Sequence[str], person: str) -> exp.Select:
    """One row per person of ``relation``: the person (``__person``) and their signature (``__signature``)."""
    keyed = _keyed(relation, quasi, person)
    signature = exp.ArrayToString(this=exp.ArraySort(this=exp.ArrayAgg(this=exp.Distinct(
        expressions=[sb.col(_KEY)]))), expression=sb.lit(""))
    return (exp.select(sb.col(_PERSON), signature.as_(_SIGNATURE, quoted=True))
            .from_(keyed.subquery("keyed")).group_by(sb.col(_PERSON)))


def signature_groups(relation: exp.Expression, quasi: Sequence[str], person: str) -> exp.Select:
    """Per person, how many people share their signature (``__people``), beside the person."""
    signed = signatures(relation, quasi, person).subquery("signed")
    sharing = exp.Window(this=exp.func("COUNT", exp.Star()), partition_by=[sb.col(_SIGNATURE)])
    return exp.select(sb.col(_PERSON), sb.col(_SIGNATURE), sharing.as_(_PEOPLE, quoted=True)).from_(signed)


def person_exposure(engine: Engine, relation: exp.Expression, quasi: Sequence[str], person: str, k: int
                    ) -> PersonExposure:
    """The :class:`PersonExposure` of ``relation`` (rows carrying column ``person``) at ``k``.  PolicyError naming
    the column for a column the relation lacks, a person column holding NULL, or a k that is not a whole number of
    at least 1."""
    checked_number(k, "k", "person exposure", whole=True, low=1)
    columns = engine.columns(relation)
    missing = [c for c in [*quasi, person] if c not in columns]
    if missing:
        raise PolicyError(f"person exposure names columns the relation does not have: {missing}; it has {columns}")
    if person in quasi:
        raise PolicyError(f"the person column {person!r} is also a quasi-identifier")
    (nulls,), = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(sb.derived(relation, "r")).where(
        sb.col(person).is_(exp.Null())))
    if nulls:
        raise PolicyError(f"the person column {person!r} is NULL in {nulls} records: each record needs its person")
    groups = signature_groups(relation, quasi, person).subquery("g")
    count, people = exp.func("COUNT", exp.Star()), sb.col(_PEOPLE)
    per_person = engine.rows(exp.select(
        count.copy(), exp.func("COUNT", exp.Distinct(expressions=[sb.col(_SIGNATURE)])),
        exp.Filter(this=count.copy(), expression=exp.Where(this=people.copy() < sb.lit(k))),
        exp.Filter(this=count.copy(), expression=exp.Where(this=people.copy().eq(sb.lit(1)))),
        exp.func("MIN", people.copy())).from_(groups))[0]
    keyed = _keyed(relation, quasi, person).subquery("keyed")
    per_class = exp.select(sb.col(_KEY), exp.func("COUNT", exp.Distinct(expressions=[sb.col(_PERSON)])).as_(
        _PEOPLE, quoted=True), exp.func("COUNT", exp.Star()).as_("__records", quoted=True)).from_(keyed).group_by(
        sb.col(_KEY))
    small = (exp.select(sb.col(_KEY)).from_(per_class.subquery("c")).where(people.copy() < sb.lit(k)))
    in_small = exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(_PERSON)]))).from_(keyed.copy()).where(
        exp.In(this=sb.col(_KEY), query=small.subquery()))
    records, classes = engine.rows(exp.select(exp.func("SUM", sb.col("__records")), exp.func("COUNT", exp.Star()))
                                   .from_(per_class.subquery("c")))[0]
    (thin,), = engine.rows(in_small)
    people_total, signature_count, below, unique, smallest = per_person
    return PersonExposure(k=k, records=int(records or 0), people=int(people_total), classes=int(classes),
                          signatures=int(signature_count), people_in_small_classes=int(thin),
                          people_below_k=int(below), unique_people=int(unique), smallest_signature_group=int(
                              smallest or 0))
