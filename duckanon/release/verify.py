"""Verifying a release as its recipient: every guarantee recomputed from the released rows alone, compared with what
its ``release_info`` claims; its content digest recomputed; its signature checked with the custodian's public key.

The release is opened read-only in a connection of its own (:func:`~duckanon.release.files.open_release`); nothing of
the custodian's (source, hierarchies, catalog) is needed or read.  What the rows can show is checked: the record
count, the classes and the smallest class with the prosecutor risk they give, every privacy model of the policy over
the released classes (t-closeness against the released distribution: what a recipient sees), the suppression (the
starred records in replace mode, the records missing in drop mode) against the policy's limit, and each number's
typed bounds against its label.  What the rows cannot show -- that no raw value of the source appears, the source's
size -- is the signature's to vouch for: signed, every field of ``release_info`` is the custodian's.

:class:`Verification` lists every check; its :attr:`~Verification.failure` is the first that fails, by the order a
recipient should act on them: a key that did not sign it, a broken signature, a failing guarantee, a changed digest.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlglot import exp

from ..declare.policy import PERSON_ROLE, RECORD_TABLE_ROLE, STRATUM_ROLE, exempt_class
from ..deferred import pandas as pd
from ..errors import (
    DigestMismatch,
    GuaranteeFails,
    PolicyError,
    SignatureMismatch,
    VerificationFailed,
    WrongKey,
)
from ..hierarchy.notation import in_notation, label_problem
from ..privacy.checks import check, class_verdicts, verdict_column
from ..privacy.classes import (
    SIZE,
    VIOLATED,
    Classes,
    compatible_classes,
    every_key_is,
    key_name,
)
from ..privacy.models import PrivacyModel
from ..privacy.people import (
    PEOPLE,
    group_sizes,
    lacking_tables,
    people_check,
    people_k,
    person_values,
    shows_suppressed,
    signature_group_histogram,
    signature_groups,
)
from ..privacy.registry import MODELS, model_from_params
from ..recode.ranges import bound_rows, bounded_attributes
from ..risk.counting import (
    class_size_histogram,
    class_size_histograms,
    compatible_histogram,
)
from ..risk.population import ClassSizes, compatible_prosecutor_risk, prosecutor_risk
from ..sqlgen import build as sb
from .digest import content_digest, digest_query
from .files import INFO_TABLE, open_release
from .signing import SIGNING_KEY, check_signature

QUASI_IDENTIFIER = "quasi-identifier"
# The order in which failures are acted on (and name the exit code): who signed, then what was altered.
_PRECEDENCE = (WrongKey, SignatureMismatch, GuaranteeFails, DigestMismatch)


@dataclass(frozen=True)
class Check:
    """One guarantee: what the release claims, what its rows give, and whether they agree (None: not checkable, with
    the reason in ``recomputed``).  ``failure`` is the kind of failure it is when it does not hold."""

    guarantee: str
    claimed: str
    recomputed: str
    holds: bool | None
    failure: type[VerificationFailed] = GuaranteeFails


@dataclass
class Verification:
    """Every check of one release (:func:`verify`)."""

    path: Path
    info: dict
    checks: list[Check]

    @property
    def holds(self) -> bool:
        """True when no check fails (checks that could not be made do not fail)."""
        return self.failure is None

    @property
    def failure(self) -> Check | None:
        failing = [c for c in self.checks if c.holds is False]
        return min(failing, key=lambda c: _PRECEDENCE.index(c.failure), default=None)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"guarantee": c.guarantee, "claimed": c.claimed, "recomputed": c.recomputed,
                              "holds": c.holds} for c in self.checks], columns=["guarantee", "claimed", "recomputed",
                                                                                  "holds"])

    def summary(self) -> str:
        first = self.failure
        if first is None:
            checked = sum(c.holds is True for c in self.checks)
            unchecked = [c.guarantee for c in self.checks if c.holds is None]
            return (f"{self.path}: verified ({checked} checks hold"
                    f"{'; not checked: ' + ', '.join(unchecked) if unchecked else ''})")
        failing = sum(c.holds is False for c in self.checks)
        return (f"{self.path}: {first.guarantee} fails: {first.recomputed} (claimed: {first.claimed})"
                f"{f' (and {failing - 1} more checks fail)' if failing > 1 else ''}")

    def raise_for_failure(self) -> None:
        """Raise the first failure's error (:class:`~duckanon.errors.GuaranteeFails`, ``DigestMismatch``, …)."""
        first = self.failure
        if first is not None:
            raise first.failure(self.summary(), self)


def verify(path: str | os.PathLike, *, public_key: object | None = None, format: str | None = None) -> Verification:
    """Verify the release at ``path`` (DuckDB, Parquet, CSV or a Spark release folder) from its rows alone; with
    ``public_key`` (a PEM or OpenSSH file, bytes or a ``cryptography`` key), also its signature.  A file that is not a
    release raises :class:`~duckanon.errors.NotARelease`; a CSV whose bytes are not those its info records,
    :class:`~duckanon.errors.DigestMismatch`.  The file is only read."""
    reader, info = open_release(path, format)
    try:
        released = sb.table(info["released_table"])
        checks = [*_signature(info, public_key), *guarantees(reader, released, info),
                  _digest(reader, released, info)]
    finally:
        reader.close()
    return Verification(Path(path), info, checks)


def _signature(info: dict, public_key: object | None) -> list[Check]:
    signed_by = info.get(SIGNING_KEY)
    if public_key is None:
        if not signed_by:
            return []
        return [Check("signature", f"signed by key {signed_by}", "not checked: give the custodian's public key",
                      None, SignatureMismatch)]
    holds, why = check_signature(info, public_key)
    failure = WrongKey if not signed_by or (not holds and "not by the key given" in why) else SignatureMismatch
    return [Check("signature", f"signed by key {signed_by}" if signed_by else "not signed", why, holds, failure)]


def _digest(reader, released: exp.Table, info: dict) -> Check:
    recorded = info.get("content_digest")
    if not recorded:
        return Check("content digest", "none recorded", "not checked: the release records no digest (written "
                                                        "before duckanon recorded one)", None, DigestMismatch)
    computed = content_digest(reader, released)
    return Check("content digest of the rows", recorded, computed, computed == recorded, DigestMismatch)


def guarantees(reader, released: exp.Table, info: dict) -> list[Check]:
    """Each guarantee ``info`` claims, recomputed from ``released`` (a relation of ``reader``): the record count,
    the classes with their risk, the suppression, each privacy model, the typed bounds."""
    counted = int(reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(released)))
    checks = [Check("released records", f"{info['released_records']:,}", f"{counted:,} rows",
                    counted == info["released_records"])]
    policy = info.get("policy") or {}
    quasi, strata = [c["column"] for c in policy.get("columns", []) if c["role"] == QUASI_IDENTIFIER], strata_of(policy)
    person, record_table = person_of(policy), record_table_of(policy)
    needed = list(dict.fromkeys([*strata, *quasi,
                                 *(m["sensitive"] for m in policy.get("models") or [] if m.get("sensitive")),
                                 *(c for c in (person, record_table) if c)]))
    if needed:
        present = set(reader.columns(released))
        missing = [c for c in needed if c not in present]
        checks.append(Check("the columns the policy names", ", ".join(needed),
                            f"missing: {', '.join(missing)}" if missing else "all present", not missing))
        if missing:  # nothing else can be recomputed: classes and models are over these columns
            return checks
    # The models first: a failing one is what a recipient must hear of before any claim that differs.
    checks += _models(reader, released, quasi, policy, info)
    if person and quasi:
        checks.append(_people(reader, released, quasi, person, record_table, policy))
    if policy:
        checks.append(_people_suppression(reader, released, quasi, person, policy) if person
                      else _suppression(reader, released, quasi, info, policy, counted))
    if quasi:
        checks += _classes(reader, released, quasi, info, person, record_table, bool(policy.get(MISSING_MATCHES_ANY)),
                           strata)
    checks += _bounds(reader, released, quasi)
    return checks


def _classes(reader, released, quasi: Sequence[str], info: dict, person: str | None, record_table: str | None,
             missing_matches_any: bool = False, strata: Sequence[str] = ()) -> list[Check]:
    """The classes, the smallest, and the prosecutor risk: of a record, or of a person under a policy that counts
    people (1 / the people sharing their signature); where a missing value matches any, of a record by the records
    compatible with it (the smallest class is the fewest such)."""
    if missing_matches_any:
        sizes, records, classes = compatible_histogram(reader, released, quasi, strata)
        smallest = int(sizes[0]) if classes else None
        risk = compatible_prosecutor_risk(sizes, records, 1.0) if classes else None
    else:
        counted = ClassSizes(*class_size_histogram(reader, released, [*strata, *quasi]))
        classes = int(counted.classes)
        smallest = int(counted.sizes[0]) if classes else None
        risky = counted if person is None else ClassSizes(*signature_group_histogram(reader, released, quasi, person,
                                                                                      record_table))
        risk = prosecutor_risk(risky, 1.0) if classes else None
    highest, average = (risk.highest, risk.average) if risk else (None, None)
    of = "" if person is None else " of a person"
    checks = [Check("classes", _shown(info.get("classes")), _shown(classes), classes == (info.get("classes") or 0)),
              Check("smallest class", _shown(info.get("smallest_class")), _shown(smallest),
                    smallest == info.get("smallest_class"))]
    for name, claimed, computed in ((f"highest prosecutor risk{of}", info.get("highest_risk"), highest),
                                    (f"average prosecutor risk{of}", info.get("average_risk"), average)):
        same = (claimed is None and computed is None) or (
            claimed is not None and computed is not None and math.isclose(claimed, computed, rel_tol=1e-9))
        checks.append(Check(name, _shown(claimed), _shown(computed), same))
    return checks


def differentially_private_release(info: Mapping) -> bool:
    """Whether the release's policy is a differential-privacy guarantee (its info withholds the source's size)."""
    named = [m.get("model") for m in (info.get("policy") or {}).get("models") or []]
    return any(name in MODELS and MODELS[name].differentially_private for name in named)


WITHHELD = "withheld: differential privacy releases neither the source's size nor the records suppressed"


def _suppression(reader, released, quasi: Sequence[str], info: dict, policy: dict, counted: int) -> Check:
    if info["source_records"] is None:
        return Check(f"records suppressed ({policy.get('suppression', 'replace')})", "not stated", WITHHELD, None)
    allowed = (int(policy["max_suppressed"]) if policy.get("max_suppressed") is not None
               else math.floor(float(policy.get("suppression_limit") or 0) * info["source_records"]))
    claimed = int(info["suppressed_records"])
    guarantee = f"at most {allowed:,} records suppressed ({policy.get('suppression', 'replace')})"
    if policy.get("suppression") == "drop":
        missing = info["source_records"] - counted
        return Check(guarantee, f"{claimed:,} suppressed", f"{missing:,} of the source's {info['source_records']:,} "
                                                            f"records missing", missing == claimed <= allowed)
    starred = int(reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(released).where(
        shows_suppressed(quasi)))) if quasi else 0
    return Check(guarantee, f"{claimed:,} suppressed", f"{starred:,} records show '*' for every quasi-identifier",
                 claimed <= allowed and starred >= claimed)


def person_of(policy: dict) -> str | None:
    """The person column of a release's policy (a policy that counts people), or None."""
    return next((c["column"] for c in policy.get("columns", []) if c["role"] == PERSON_ROLE), None)


def strata_of(policy: dict) -> list[str]:
    """The strata of a release's policy, within each of whose values every model holds (none: the whole release)."""
    return [c["column"] for c in policy.get("columns", []) if c["role"] == STRATUM_ROLE]


def stratified_classes(relation: exp.Expression, quasi: Sequence[str], strata: Sequence[str]) -> Classes:
    """The classes of ``relation`` by ``quasi`` within each stratum: the strata lead the key as its tables'."""
    return Classes.of(relation, [*strata, *quasi], table_keys=len(strata))


def record_table_of(policy: dict) -> str | None:
    """The column naming each record's table in a release of several tables (:mod:`duckanon.encode.tables`), or
    None."""
    return next((c["column"] for c in policy.get("columns", []) if c["role"] == RECORD_TABLE_ROLE), None)


def person_k(policy: dict) -> int:
    """The k every signature of a policy that counts people must be shared by (:func:`people_k` of the models the
    policy describes; one that cannot be read is reported by the models' check)."""
    models = []
    for described in policy.get("models") or []:
        with contextlib.suppress(PolicyError, KeyError, TypeError):
            models.append(model_from_params(described["model"], described["params"]))
    return people_k(models)


def _people(reader, released, quasi: Sequence[str], person: str, record_table: str | None, policy: dict) -> Check:
    """Every signature (the set of classes of one person's records; of (table, class) pairs in a release of several
    tables) shared by k people."""
    k = person_k(policy)
    report = people_check(reader, Classes.of(released, quasi), person, k,
                          exempt=exempt_class(policy.get("suppression", "replace")), record_table=record_table,
                          lacking=_lacking(policy, quasi))
    if report.satisfied:
        how = (f"all {report.signatures:,} signatures of {report.people:,} people are shared by {k} or more "
               f"(smallest {report.smallest_signature_group:,})")
    else:
        how = (f"{_counted(report.violating_people, 'person has', 'people have')} a signature fewer than {k} people "
               f"share ({_counted(report.violating_classes, 'signature', 'signatures')})")
    return Check(f"k-anonymity over people with k = {k} (by {person})", "every signature shared by k people", how,
                 report.satisfied)


def _people_suppression(reader, released, quasi: Sequence[str], person: str, policy: dict) -> Check:
    """The people suppressed, against the limit that counts people: in replace mode those whose records show '*'
    for every quasi-identifier, in drop mode the source's people missing."""
    facts = policy.get("people") or {}
    source, claimed = int(facts.get("source", 0)), int(facts.get("suppressed", 0))
    allowed = (int(policy["max_suppressed"]) if policy.get("max_suppressed") is not None
               else math.floor(float(policy.get("suppression_limit") or 0) * source + 1e-9))
    guarantee = f"at most {allowed:,} people suppressed ({policy.get('suppression', 'replace')})"
    people = exp.func("COUNT", exp.Distinct(expressions=[sb.col(person)]))
    if policy.get("suppression") == "drop":
        missing = source - int(reader.value(exp.select(people).from_(released)))
        return Check(guarantee, f"{claimed:,} suppressed", f"{missing:,} of the source's {source:,} people missing",
                     missing == claimed <= allowed)
    record_table = record_table_of(policy)
    starred = int(reader.value(exp.select(people).from_(released).where(shows_suppressed(
        quasi, _lacking(policy, quasi), record_table))))
    return Check(guarantee, f"{claimed:,} suppressed", f"{starred:,} people's records show '*' for every "
                                                       f"quasi-identifier{' of their table' if record_table else ''}",
                 claimed <= allowed and starred >= claimed)


# What a check says of a model the release alone cannot decide: it compares classes with a population table, or
# prices them by the domain shares of their values (which need the hierarchies); the release holds neither.
NEEDS_POPULATION = "the population table"
NEEDS_HIERARCHIES = "the hierarchies' domain shares (it prices each class by them)"


def not_recomputed(model: PrivacyModel) -> str | None:
    """Why the release alone cannot recompute ``model``'s verdicts, or None where it can."""
    needs = [what for what, needed in ((NEEDS_POPULATION, model.population is not None),
                                       (NEEDS_HIERARCHIES, model.prices_classes)) if needed]
    return f"not recomputed: it needs {' and '.join(needs)}, which the release does not hold" if needs else None
# What the plain-SQL view says of a threshold on an estimate that solves equations.
NEEDS_ESTIMATOR = "not recomputed in SQL: its estimator solves equations (duckanon.verify recomputes it)"


def _models(reader, released, quasi: Sequence[str], policy: dict, info: dict) -> list[Check]:
    checks, models = [], []
    for described in policy.get("models") or []:
        try:
            model = model_from_params(described["model"], described["params"])
        except (PolicyError, KeyError, TypeError) as error:
            checks.append(Check(described.get("model", "a model"), "holds", f"not checked: {error}", None))
            continue
        if (why := not_recomputed(model)) is not None:
            checks.append(Check(plain_model(model.name, model.params()), "holds", why, None))
            continue
        models.append(model)
        sample = described["params"].get("sample_records")
        if sample is not None:
            # A threshold derived from the data's size (estimated k-map's k') must be derived from this source's:
            # its records, or under a policy that counts people its people.
            unit, size = (("records", info["source_records"]) if person_of(policy) is None
                          else ("people", (policy.get("people") or {}).get("source")))
            checks.append(Check(f"{described['model']}'s threshold derived from the source's {unit}",
                                f"{sample:,} {unit}", f"the source had {size:,}" if size is not None
                                else f"the source's {unit} are not stated", sample == size))
    if not models:
        return checks
    # One check of every model: its per-model counts say which hold, its listing names the first failing class.
    # Under a policy that counts people, a model over sensitive values counts each person's value once per class.
    exempt = exempt_class(policy.get("suppression", "replace"))
    person, record_table, strata = person_of(policy), record_table_of(policy), strata_of(policy)
    by_people, by_records = _split_by_people(models, person)
    judged = []
    counted = (compatible_classes(released, quasi, strata) if policy.get(MISSING_MATCHES_ANY)
               else stratified_classes(released, quasi, strata))
    for group, classes in ([(by_records, counted)] if by_records else []) + [
            ([m], person_values(released, quasi, person, m.sensitive, record_table, _lacking(policy, quasi)))
            for m in by_people]:
        report = check(reader, classes, group, key_names=list(classes.keys), most_violations=100, exempt=exempt)
        judged += [(m, bad, report) for m, bad in zip(group, report.model_rows.records())]
    for model, bad, report in judged:
        if model.risk_threshold:  # over classes of records, or under a policy that counts people its groups
            checks.append(_threshold(reader, released, quasi, strata, exempt, person, record_table, model))
            continue
        if bad["violating_classes"] == 0:
            how = f"all {report.classes:,} classes hold (smallest {report.smallest_class:,} records)"
        else:
            first = next((row for row in report.violation_rows.records() if row[model.describe()]), None)
            named = ("" if first is None else "; first: the class " + ", ".join(
                f"{q} = {first[q]!r}" for q in [*strata, *quasi])
                + f" ({_counted(int(first['size']), 'record', 'records')})")
            how = (f"{_counted(bad['violating_classes'], 'class', 'classes')} "
                   f"({_counted(bad['violating_records'], 'record', 'records')}) "
                   f"{'violates' if bad['violating_classes'] == 1 else 'violate'} it{named}")
        named_model = plain_model(model.name, model.params()) + (OVER_PEOPLE if model in by_people else "")
        checks.append(Check(named_model, "holds", how, bad["violating_classes"] == 0))
    return checks


def _threshold(reader, released: exp.Expression, quasi: Sequence[str], strata: Sequence[str], exempt: str | None,
               person: str | None, record_table: str | None, model: PrivacyModel) -> Check:
    """A risk threshold over the release's classes (the '*' class left out where ``exempt`` names it), or under a
    policy that counts people their signature groups; with strata, in each stratum, as it applies there (its share of
    the released records): the first that fails is named."""
    counted = _counted_classes(released, quasi, exempt)
    named = plain_model(model.name, model.params()) + (OVER_PEOPLE if person else "")
    if strata:
        columns = [sb.col(c) for c in strata]  # each stratum's records, the '*' class's among them
        held = {tuple(row[:-1]): int(row[-1]) for row in reader.rows(
            exp.select(*columns, exp.func("COUNT", exp.Star())).from_(released).group_by(*[c.copy() for c in columns]))}
        records = sum(held.values())
        histograms = class_size_histograms(reader, counted, quasi, strata)
        for stratum in sorted(held, key=lambda values: tuple(map(str, values))):
            sizes, counts = histograms.get(stratum, ([], []))
            stratified = model.in_stratum(held[stratum] / records)
            if not stratified.holds(np.asarray(sizes, np.int64), np.asarray(counts, np.int64)):
                shown = ", ".join(f"{c} = {v!r}" for c, v in zip(strata, stratum))
                return Check(named, "holds", f"the stratum {shown}: {stratified.figure(sizes, counts)}: fails", False)
        return Check(named, "holds", f"holds in each of the {len(held):,} strata", True)
    sizes, counts = (class_size_histogram(reader, counted, quasi) if person is None else
                     signature_group_histogram(reader, counted, quasi, person, record_table))
    holds = model.holds(sizes, counts)
    return Check(named, "holds", f"{model.figure(sizes, counts)}: {'holds' if holds else 'fails'}", holds)


def _lacking(policy: dict, quasi: Sequence[str]) -> dict[str, list[str]]:
    """The quasi-identifiers and sensitive columns some tables of a release of several tables lack (with those
    tables), from its policy's tables; empty for a release of one table."""
    sensitive = [m["sensitive"] for m in policy.get("models") or [] if m.get("sensitive")]
    return lacking_tables(policy.get("tables") or {}, [*quasi, *sensitive])


def _split_by_people(models: Sequence[PrivacyModel], person: str | None
                     ) -> tuple[list[PrivacyModel], list[PrivacyModel]]:
    """(the models counted over people: those over sensitive values under a policy that counts people, each
    person's value once per class; the models counted over records)."""
    by_people = [m for m in models if person is not None and m.sensitive is not None]
    return by_people, [m for m in models if m not in by_people]


def _counted_classes(released: exp.Expression, quasi: Sequence[str], exempt: str | None) -> exp.Expression:
    """The released records whose class the models count: all, but the '*' class where ``exempt`` names it."""
    if exempt is None or not quasi:
        return released
    return exp.select(exp.Star()).from_(released).where(exp.not_(every_key_is(quasi, exempt))).subquery("counted")


def _bounds(reader, released, quasi: Sequence[str]) -> list[Check]:
    checks = []
    for attribute, (rows, problems) in bound_rows(reader, released,
                                                  bounded_attributes(reader.columns(released), quasi)).items():
        problems += [p for label, low, high in rows if low is not None
                     and (p := label_problem(label, float(low), float(high))) is not None]
        judged = sum(in_notation(label) for label, low, _ in rows if low is not None)
        agree = f"{len(rows):,} labels, each with one pair of bounds"
        if judged == len(rows):
            agree = f"{len(rows):,} labels, each containing its bounds"
        elif judged == 0:
            agree += " (a hierarchy's own labels: what they stand for is not written in them)"
        else:
            agree += f"; the {judged:,} in duckanon's notation contain them"
        checks.append(Check(f"typed bounds of {attribute}", "each label's bounds contain what it stands for",
                            "; ".join(problems[:3]) if problems else agree, not problems))
    return checks


VIEW = "release_verification"
# In a release's policy: a missing value matches any value when its classes are counted (cell suppression).
MISSING_MATCHES_ANY = "missing_matches_any"
# How a model over sensitive values is named when it counts each person's value once per class.
OVER_PEOPLE = " over people"


def verification_view(table: str, types: Mapping[str, str], quasi: Sequence[str], models: Sequence[PrivacyModel],
                      allowed_suppressed: int, suppression: str, person: str | None = None,
                      record_table: str | None = None, lacking: Mapping[str, Sequence[str]] | None = None,
                      missing_matches_any: bool = False, strata: Sequence[str] = ()) -> exp.Select:
    """The plain-SQL view a DuckDB release carries (:data:`VIEW`): per guarantee, what ``release_info`` claims, what
    the rows give, and whether they agree, so that a recipient with only the ``duckdb`` shell sees them.  The content
    digest, the record count, the classes and every model are recomputed by the view's own SQL from the table (the
    '*' class left out of the models under ARX's ``replace-unchecked``); under a policy that counts people (column
    ``person``), the people's signatures (of (table, class) pairs, by ``record_table``, in a release of several
    tables, where a suppressed record shows '*' in the quasi-identifiers its table holds, ``lacking`` the others) and
    the people suppressed, against ``allowed_suppressed`` people.  With ``missing_matches_any`` (cell suppression),
    a record's class is every record compatible with it, a missing value matching any.  With ``strata``, the classes,
    the table a model compares with and each risk threshold are those of each stratum.  ``types``: the released
    columns and their DuckDB types, in order (the digest hashes each distinct row once, told apart by type)."""
    released = sb.table(table)
    exempt = exempt_class(suppression)
    checkable = [m for m in models if not_recomputed(m) is None and not m.risk_threshold]
    by_people, by_records = _split_by_people(checkable, person)

    def claimed(column: str) -> exp.Expression:
        return exp.select(sb.col(column)).from_(sb.table(INFO_TABLE)).subquery()

    def value(query: exp.Select) -> exp.Expression:
        return query.subquery()

    def text(expression: exp.Expression) -> exp.Expression:
        return exp.cast(expression, exp.DataType.build("VARCHAR"))

    def row(guarantee: str, claim: exp.Expression, recomputed: exp.Expression, holds: exp.Expression) -> exp.Select:
        return exp.select(sb.lit(guarantee).as_("guarantee", quoted=True), text(claim).as_("claimed", quoted=True),
                          text(recomputed).as_("recomputed", quoted=True),
                          exp.func("COALESCE", holds, exp.false()).as_("holds", quoted=True))

    counted = value(exp.select(exp.func("COUNT", exp.Star())).from_(released))
    digest = value(digest_query(released, types))
    rows = [row("content digest of the rows", claimed("content_digest"), digest,
                exp.EQ(this=claimed("content_digest"), expression=digest.copy())),
            row("released records", claimed("released_records"), counted,
                exp.EQ(this=claimed("released_records"), expression=counted.copy()))]
    if quasi:
        verdicts = sb.table("__verdicts")
        for name, column, aggregate in (("classes", "classes", exp.func("COUNT", exp.Star())),
                                        ("smallest class", "smallest_class", exp.func("MIN", sb.col(SIZE)))):
            computed = value(exp.select(aggregate).from_(verdicts.copy()))
            rows.append(row(name, claimed(column), computed, exp.EQ(this=claimed(column), expression=computed.copy())))
        if any(m.differentially_private for m in models):
            rows.append(row(f"records suppressed ({suppression})", exp.null(), sb.lit(WITHHELD), exp.true()))
        elif person is None:
            rows.append(_suppression_row(row, claimed, value, released, counted, quasi, allowed_suppressed,
                                         suppression))
        else:
            rows += _people_rows(row, value, released, quasi, person, record_table, lacking or {}, models,
                                 allowed_suppressed, suppression)
        keys = stratified_classes(released, quasi, strata).key_columns[len(strata):]
        counted_class = exp.true() if exempt is None else exp.not_(every_key_is(keys, exempt))
        judged = [(plain_model(m.name, m.params()), sb.col(verdict_column(i)), verdicts)
                  for i, m in enumerate(by_records)]
        for model in by_people:  # each person's value once per class
            counted = person_values(released, quasi, person, model.sensitive, record_table, lacking)
            judged.append((plain_model(model.name, model.params()) + OVER_PEOPLE, sb.col(VIOLATED),
                           class_verdicts(counted, [model]).subquery("person_verdicts")))
        for guarantee, verdict, relation in judged:
            violating = value(exp.select(exp.func("COUNT", exp.Star())).from_(relation.copy()).where(
                exp.and_(verdict, counted_class.copy())))
            rows.append(row(guarantee, sb.lit("0 classes violate it"),
                            exp.Concat(expressions=[text(violating), sb.lit(" classes violate it")], safe=False),
                            exp.EQ(this=violating.copy(), expression=sb.lit(0))))
        for model in models:
            guarantee = plain_model(model.name, model.params()) + (
                OVER_PEOPLE if person is not None and model.risk_threshold else "")
            holds = model.sql_holds(sb.col(SIZE)) if model.risk_threshold else None
            if holds is not None:  # a figure of the counted classes' sizes, or of people's signature groups
                sized = (exp.select(exp.Star()).from_(verdicts.copy()).where(counted_class.copy()) if person is None
                         else _group_sizes(released, quasi, person, record_table, exempt))
                recomputed = value(_in_every_stratum(holds, sized.subquery("sized"), len(strata)))
                rows.append(row(guarantee, sb.lit("holds"), exp.Case().when(recomputed, sb.lit("holds")).else_(
                    sb.lit("fails")), recomputed.copy()))
            elif model not in checkable:  # not recomputed here: holds stays NULL
                why = NEEDS_ESTIMATOR if model.risk_threshold else not_recomputed(model)
                rows.append(exp.select(
                    sb.lit(guarantee).as_("guarantee", quoted=True),
                    sb.lit("holds" if model.risk_threshold else "0 classes violate it").as_("claimed", quoted=True),
                    sb.lit(why).as_("recomputed", quoted=True),
                    exp.cast(exp.Null(), exp.DataType.build("BOOLEAN")).as_("holds", quoted=True)))
    union = rows[0]
    for other in rows[1:]:
        union = exp.union(union, other, distinct=False, copy=False)  # the rows are this view's own
    query = exp.select(exp.Star()).from_(union.subquery("guarantees"))
    if quasi:
        counted = (compatible_classes(released, quasi, strata) if missing_matches_any
                   else stratified_classes(released, quasi, strata))
        query = query.with_("__verdicts", as_=class_verdicts(counted, by_records))
    return query


def _in_every_stratum(holds: exp.Expression, sized: exp.Expression, strata: int) -> exp.Select:
    """``holds``, an aggregate over ``sized``'s classes, of all of them, or with ``strata`` (the leading keys of
    :func:`class_verdicts`' rows) true in each stratum."""
    if not strata:
        return exp.select(holds).from_(sized)
    tables = [sb.col(key_name(i)) for i in range(strata)]
    per_stratum = exp.select(holds.as_("__holds", quoted=True)).from_(sized).group_by(*tables)
    return exp.select(exp.func("COALESCE", exp.func("BOOL_AND", sb.col("__holds")), exp.true())).from_(
        per_stratum.subquery("strata"))


def _suppression_row(row, claimed, value, released: exp.Table, counted: exp.Expression, quasi: Sequence[str],
                     allowed_suppressed: int, suppression: str) -> exp.Select:
    """Replace mode: the suppressed records are among those starred; drop mode: they are the ones missing."""
    drop = suppression == "drop"
    shown = (exp.Sub(this=claimed("source_records"), expression=counted.copy()) if drop else
             value(exp.select(exp.func("COUNT", exp.Star())).from_(released.copy()).where(
                 shows_suppressed(quasi))))
    agrees = (exp.EQ if drop else exp.GTE)(this=shown.copy(), expression=claimed("suppressed_records"))
    return row(f"at most {allowed_suppressed:,} records suppressed ({suppression})", claimed("suppressed_records"),
               shown, exp.and_(agrees, exp.LTE(this=claimed("suppressed_records"), expression=sb.lit(allowed_suppressed))))


def _group_sizes(released: exp.Table, quasi: Sequence[str], person: str, record_table: str | None,
                 exempt: str | None) -> exp.Select:
    """One row per signature group of ``released`` (the '*' class left out where ``exempt`` names it), its people
    as the class-size column :meth:`~duckanon.privacy.thresholds.RiskThreshold.sql_holds` reads."""
    counted = released if exempt is None else _counted_classes(released, quasi, exempt)
    groups = group_sizes(Classes.of(counted, quasi), person, record_table).subquery("g")
    return exp.select(sb.col(PEOPLE).as_(SIZE, quoted=True)).from_(groups)


def _people_rows(row, value, released: exp.Table, quasi: Sequence[str], person: str, record_table: str | None,
                 lacking: Mapping[str, Sequence[str]], models: Sequence[PrivacyModel], allowed_suppressed: int,
                 suppression: str) -> list[exp.Select]:
    """The view's rows of a policy that counts people: people whose signature fewer than k people share (none may
    be), and the people suppressed against the limit, as :func:`_people` and :func:`_people_suppression`."""
    k = people_k(models)
    exempt = exempt_class(suppression)
    counted = released if exempt is None else _counted_classes(released, quasi, exempt)
    groups = signature_groups(Classes.of(counted, quasi), person, record_table).subquery("g")
    exposed = value(exp.select(exp.func("COUNT", exp.Star())).from_(groups).where(sb.col(PEOPLE) < sb.lit(k)))
    rows = [row(f"k-anonymity over people with k = {k} (by {person})", sb.lit("0 people exposed"),
                exp.Concat(expressions=[exp.cast(exposed, exp.DataType.build("VARCHAR")), sb.lit(" people exposed")],
                           safe=False), exp.EQ(this=exposed.copy(), expression=sb.lit(0)))]

    def recorded(fact: str) -> exp.Expression:  # what release_info's policy records of the people
        return exp.cast(exp.select(exp.func("json_extract_string", sb.col("policy"), sb.lit(f"$.people.{fact}")))
                        .from_(sb.table(INFO_TABLE)).subquery(), exp.DataType.build("BIGINT"))

    claimed, source = recorded("suppressed"), recorded("source")
    people = exp.func("COUNT", exp.Distinct(expressions=[sb.col(person)]))
    shown = (exp.Sub(this=source, expression=value(exp.select(people).from_(released.copy())))
             if suppression == "drop" else value(exp.select(people.copy()).from_(released.copy()).where(
                 shows_suppressed(quasi, lacking, record_table))))
    agrees = (exp.EQ if suppression == "drop" else exp.GTE)(this=shown.copy(), expression=claimed.copy())
    rows.append(row(f"at most {allowed_suppressed:,} people suppressed ({suppression})", claimed.copy(), shown,
                    exp.and_(agrees, exp.LTE(this=claimed.copy(), expression=sb.lit(allowed_suppressed)))))
    return rows


def plain_model(name: str, params: dict) -> str:
    """A model in words a reader knows: ``k-anonymity with k = 5``, ``t-closeness of salary-class with t = 0.2``."""
    shown = {k: v for k, v in params.items() if not isinstance(v, (dict, list)) and v is not None}
    sensitive = shown.pop("sensitive", None)
    settings = ", ".join(f"{k} = {v}" for k, v in shown.items())
    return f"{name}{f' of {sensitive}' if sensitive else ''}{f' with {settings}' if settings else ''}"


def _counted(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    return f"{value:,}" if isinstance(value, int) else str(value)
