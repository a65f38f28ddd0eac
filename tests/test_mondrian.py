"""Mondrian in DuckDB, checked against an independent recursive implementation and plain pandas group-bys.

The reference below follows LeFevre et al.'s strict Mondrian as seed 002 writes it, record by record in Python, with
the same conventions the SQL documents (median = the ⌈n/2⌉-th value, lhs = values <= median; hierarchical attributes
cut into the children of the partition's lowest common ancestor; NULL split from the rest first; widest normalized
span, ties to the first attribute).  Strict Mondrian is deterministic, so the SQL must find exactly its partitions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import ErrorLevel, exp

import duckanon
from duckanon import (
    BasicBetaLikeness,
    DistinctLDiversity,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    PolicyNotSatisfied,
    TCloseness,
    verify,
)
from duckanon.cli import run
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.engine import as_engine
from duckanon.partition.mondrian import Mondrian, dimensions
from duckanon.release.files import read_release_info

COLOR = Hierarchy.from_lists([["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"],
                              ["green", "cold", "*"]], name="color")
SIZES = ["S", "M", "L", "XL"]
QUASI = ["age", "color", "size"]
MISSING = "<NULL>"  # pandas merges and groups on a sentinel where SQL compares NULL-safely


# ----------------------------------------------------------------------------------------- the reference
def leaf_positions(hierarchy: Hierarchy) -> tuple[dict, list[dict]]:
    """Leaf -> position in the order of ancestors from the top down; per level, leaf -> ancestor."""
    rows = sorted(hierarchy.rows, key=lambda r: tuple((v is None, str(v)) for v in reversed(r)))
    return {r[0]: i for i, r in enumerate(rows)}, [{r[0]: r[j] for r in rows} for j in range(hierarchy.levels)]


def reference_mondrian(frame: pd.DataFrame, k: int, l: int | None, t: float | None = None,  # noqa: E741
                       allowed: Callable[[list[int]], bool] | None = None, records: pd.DataFrame | None = None
                       ) -> list[frozenset[int]]:
    """The partitions of ``frame``'s rows; ``allowed`` judges a part instead of k, l and t over its rows, and
    ``records`` (when the rows are people's points) give the range the age's span is normalized by."""
    positions, ancestors = leaf_positions(COLOR)
    leaves = len(COLOR.rows)
    ages = (frame if records is None else records)["age"].dropna()
    age_scale = float(ages.max() - ages.min())
    order = {v: i for i, v in enumerate(SIZES)}

    def value(i: int, attribute: str):
        v = frame.at[i, attribute]
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        return float(v) if attribute == "age" else positions[v] if attribute == "color" else float(order[v])

    table = None if allowed is not None else frame["s"].fillna(MISSING).value_counts(normalize=True)

    def satisfies(part: list[int]) -> bool:
        if allowed is not None:
            return allowed(part)
        if len(part) < k:
            return False
        values = frame.loc[part, "s"].fillna(MISSING)
        if l is not None and values.nunique() < l:
            return False
        # t-closeness, equal distance: half the total variation from the whole table's distribution.
        shares = values.value_counts(normalize=True).reindex(table.index, fill_value=0.0)
        return t is None or (shares - table).abs().sum() / 2 <= t + 1e-9

    def cut(part: list[int], attribute: str):
        values = {i: value(i, attribute) for i in part}
        known = [v for v in values.values() if v is not None]
        if known and len(known) < len(part):
            return 1.0, [[i for i in part if values[i] is None], [i for i in part if values[i] is not None]]
        if not known or min(known) == max(known):
            return 0.0, None
        low, high = min(known), max(known)
        if attribute == "color":
            leaf = {p: v for v, p in positions.items()}
            level = next((j for j in range(1, COLOR.levels)
                          if ancestors[j][leaf[low]] == ancestors[j][leaf[high]]), COLOR.levels)
            covered = sum(1 for v in positions if level == COLOR.levels or
                          ancestors[level][v] == ancestors[level][leaf[low]])
            width = (covered - 1) / (leaves - 1)
            children: dict = {}
            for i in part:
                children.setdefault(ancestors[level - 1][leaf[values[i]]], []).append(i)
            return width, list(children.values())
        scale = age_scale if attribute == "age" else float(len(SIZES) - 1)
        median = sorted(known)[math.ceil(len(known) / 2) - 1]
        lhs = [i for i in part if values[i] <= median]
        rhs = [i for i in part if values[i] > median]
        return (high - low) / scale, [lhs, rhs] if rhs else None

    result: list[frozenset[int]] = []

    def anonymize(part: list[int]) -> None:
        best = None
        for index, attribute in enumerate(QUASI):
            width, parts = cut(part, attribute)
            if parts is None or width <= 0 or len(parts) < 2 or not all(satisfies(p) for p in parts):
                continue
            if best is None or width > best[0]:
                best = (width, index, parts)
        if best is None:
            result.append(frozenset(part))
            return
        for p in best[2]:
            anonymize(p)

    anonymize(list(frame.index))
    return result


def expected_labels(frame: pd.DataFrame, partitions: list[frozenset[int]]) -> pd.DataFrame:
    """Each record's generalized values, computed in pandas from its partition, and its age's bounds."""
    _, ancestors = leaf_positions(COLOR)
    out = frame.astype(object)
    out["age_low"] = out["age_high"] = None
    # Ranges are written with as many digits as the widest number any range shows (ages are never negative here).
    shown = [frame.loc[sorted(part), "age"] for part in partitions]
    digits = max([len(str(int(v))) for ages in shown if ages.notna().all() for v in (ages.min(), ages.max())],
                 default=1)
    for part in partitions:
        rows = sorted(part)
        ages, colors, sizes = (frame.loc[rows, a] for a in QUASI)

        def guarded(values: pd.Series, label):
            if values.isna().all():
                return None
            return "*" if values.isna().any() else label(values)

        out.loc[rows, "age"] = guarded(ages, lambda v: f"[{int(v.min()):0{digits}d}, {int(v.max()):0{digits}d}]")
        if ages.notna().all():
            out.loc[rows, "age_low"], out.loc[rows, "age_high"] = int(ages.min()), int(ages.max())
        distinct = set(colors.dropna())
        out.loc[rows, "color"] = guarded(colors, lambda v: next(
            iter(distinct)) if len(distinct) == 1 else next(
            (ancestors[j][next(iter(distinct))] for j in range(1, COLOR.levels)
             if len({ancestors[j][c] for c in distinct}) == 1), "*"))
        out.loc[rows, "size"] = guarded(sizes, lambda v: "{" + ",".join(sorted(set(v))) + "}")
    return out


# ------------------------------------------------------------------------------------------- helpers
def make_source(con, rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["age", "color", "size", "s"])
    frame["age"] = frame["age"].astype("Int64")
    frame.insert(0, "id", range(len(frame)))
    con.register("frame", frame)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return frame


def policy(k: int, l: int | None = None, t: float | None = None, person: str | None = None  # noqa: E741
           ) -> Policy:
    models = [KAnonymity(k)] + ([DistinctLDiversity("s", l)] if l else []) + ([TCloseness("s", t)] if t else [])
    return Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=models,
                  sensitive=["s"], insensitive=["id", *([person] if person else [])], person=person)


def sql_partitions(con, frame: pd.DataFrame, pol: Policy, relaxed: bool = False):
    """Run Mondrian; the partitioning and its assignment table as a frame."""
    anon = duckanon.connect(con)
    with bind(anon.workspace, "t", pol, partitioning=True) as bound:
        dims = dimensions(as_engine(con), bound.counted, bound.quasi_identifiers, bound.hierarchies, orders={"size": SIZES})
        partitioning = Mondrian(as_engine(con), bound.counted, dims, pol.sensitive, pol.models, relaxed=relaxed).run()
        try:
            assignment = as_engine(con).frame(exp.select(exp.Star()).from_(partitioning.assignment.table))
        finally:
            partitioning.close()
    return partitioning, assignment


def refused(anon, pol: Policy, path, bad: bool) -> bool:
    """``bad``: then the documented checks refuse the input before any partitioning, and nothing is written."""
    if bad:
        with pytest.raises(PolicyError):
            anon.mondrian("t", pol, path, orders={"size": SIZES})
        assert not path.exists()
    return bad


def keyed(frame: pd.DataFrame, columns) -> pd.DataFrame:
    out = frame[columns].astype(object).where(frame[columns].notna(), MISSING)
    return out.astype(str)


# --------------------------------------------------------------------------------------------- tests
RECORDS = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 30)),
                             st.sampled_from(["red", "orange", "blue", "green", None]),
                             st.sampled_from(SIZES + [None]),
                             st.sampled_from(["a", "b", "c", None])), min_size=1, max_size=70)


def bad_input(frame: pd.DataFrame, k: int, l: int | None) -> bool:  # noqa: E741
    """Whether the documented checks must reject this input before any partitioning."""
    if k > len(frame) or (l and frame["s"].fillna(MISSING).nunique() < l):
        return True
    return any(frame[a].isna().all() or (frame[a].notna().all() and frame[a].nunique() == 1) for a in QUASI)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=RECORDS, k=st.integers(1, 6), l=st.sampled_from([None, 2]), t=st.sampled_from([None, None, 0.4]))
def test_strict_mondrian_finds_the_reference_partitions_and_publishes_them(rows, k, l, t,  # noqa: E741
                                                                             tmp_path_factory):
    con = duckdb.connect()
    frame = make_source(con, rows)
    pol = policy(k, l, t)
    path = tmp_path_factory.mktemp("release") / "r.duckdb"
    anon = duckanon.connect(con)
    if refused(anon, pol, path, bad_input(frame, k, l)):
        return
    partitions = reference_mondrian(frame, k, l, t)
    result = anon.mondrian("t", pol, path, orders={"size": SIZES})
    assert result.partitioning.partitions == len(partitions)
    with duckdb.connect(str(path), read_only=True) as reader:
        released = reader.execute("SELECT * FROM release").df()
    # Every record once, each with its partition's generalized values.
    assert sorted(released["id"]) == list(range(len(frame)))
    expected = expected_labels(frame, partitions)
    got = released.set_index("id").sort_index()
    assert list(released.columns) == ["id", "age", "age_low", "age_high", "color", "size", "s"]
    for attribute in [*QUASI, "age_low", "age_high"]:
        want = expected.set_index("id").sort_index()[attribute].astype(object)
        assert [None if pd.isna(v) else v for v in got[attribute]] == [None if pd.isna(v) else v for v in want], \
            attribute
    # Every class of the release satisfies the policy, by pandas.
    classes = keyed(released, QUASI).assign(s=released["s"].fillna(MISSING)).groupby(QUASI)
    assert classes.size().min() >= k
    if l:
        assert classes["s"].nunique().min() >= l
    if t:
        table = keyed(frame, ["s"])["s"].value_counts(normalize=True)
        shares = classes["s"].value_counts(normalize=True).unstack(fill_value=0.0).reindex(columns=table.index,
                                                                                           fill_value=0.0)
        assert ((shares - table).abs().sum(axis=1) / 2).max() <= t + 1e-9
    assert result.metrics["records"] == len(frame) and result.metrics["suppressed"] == 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=RECORDS, k=st.integers(1, 5), beta=st.sampled_from([0.5, 1.0, 2.0]))
def test_strict_mondrian_judges_beta_likeness_against_the_whole_table(rows, k, beta):
    """Basic β-likeness compares a part with the whole table, as t-closeness does: (p − q) / q ≤ β for every value
    of the part, q its share of the table, never of the partitions still being cut."""
    con = duckdb.connect()
    frame = make_source(con, rows)
    if bad_input(frame, k, None):
        return
    values = frame["s"].fillna(MISSING)
    table = values.value_counts(normalize=True)

    def allowed(part: list[int]) -> bool:
        shares = values[part].value_counts(normalize=True)
        return len(part) >= k and bool(((shares - table[shares.index]) / table[shares.index] <= beta + 1e-9).all())

    pol = dataclasses.replace(policy(k), models=[KAnonymity(k), BasicBetaLikeness("s", beta)])
    partitioning, assignment = sql_partitions(con, frame, pol)
    expected = reference_mondrian(frame, k, None, allowed=allowed)
    assert partitioning.partitions == len(expected)
    keys = ["age", "color", "size", "s"]
    got = keyed(assignment, keys).assign(group=assignment["group_id"]).groupby("group")[keys].agg(
        lambda column: tuple(sorted(column))).apply(tuple, axis=1)
    want = [tuple(tuple(sorted(keyed(frame.loc[sorted(part)], keys).drop_duplicates()[c])) for c in keys)
            for part in expected]
    assert sorted(got) == sorted(want)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=RECORDS, k=st.integers(1, 6), l=st.sampled_from([None, 2]), relaxed=st.booleans())
def test_every_record_lands_in_exactly_one_partition_that_satisfies_the_policy(rows, k, l, relaxed):  # noqa: E741
    con = duckdb.connect()
    frame = make_source(con, rows)
    if bad_input(frame, k, l):
        return
    pol = policy(k, l)
    partitioning, assignment = sql_partitions(con, frame, pol, relaxed)
    keys = ["age", "color", "size", "s"]
    # Records per key in the source and in the assignment, by pandas.
    source_counts = keyed(frame, keys).value_counts()
    assigned_counts = keyed(assignment, keys).assign(n=assignment["records"]).groupby(keys)["n"].sum()
    assert source_counts.sort_index().to_dict() == assigned_counts.sort_index().to_dict()
    if not relaxed:
        assert not keyed(assignment, keys).duplicated().any()  # strict never separates equal records
    per_group = assignment.assign(s=assignment["s"].fillna(MISSING)).groupby("group_id")
    assert per_group["records"].sum().min() >= k
    if l:
        lacking = [g for g, rows_ in per_group if rows_.loc[rows_["records"] > 0, "s"].nunique() < l]
        assert not lacking
    assert per_group.ngroups == partitioning.partitions


def test_relaxed_splits_records_equal_to_the_median():
    con = duckdb.connect()
    # Ten records with age 5 and one distinct older one: strict cannot cut (the median is the maximum but one side
    # would hold a single record); relaxed puts five and six of them on either side.
    make_source(con, [(5, "red", "S", "a")] * 10 + [(9, "red", "S", "b")])
    pol = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(5)], sensitive=["s"], others="drop")
    anon = duckanon.connect(con)
    strict = anon.mondrian("t", pol)
    relaxed = anon.mondrian("t", pol, relaxed=True)
    assert strict.partitioning.partitions == 1 and strict.metrics["loss"] == pytest.approx(1.0)
    assert relaxed.partitioning.partitions == 2
    # [5, 5] for five records, [5, 9] for six: loss 6/11 of the range.
    assert relaxed.metrics["loss"] == pytest.approx(6 / 11)
    assert relaxed.metrics["dm"] == 5 ** 2 + 6 ** 2 and relaxed.metrics["average-class-size"] == 5.5


def test_seed002_first_cut_on_adult_matches_pandas():
    """The root cut on Adult (age, sex, race, marital-status; k=10): the widest attribute and its median."""
    con = duckdb.connect()
    load_adult(con, "adult")
    quasi = ["age", "sex", "race", "marital-status"]
    frame = con.execute('SELECT age, sex, race, "marital-status" FROM adult').df()
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi[1:]}
    pol = Policy(quasi_identifiers={"age": None, **hierarchies}, models=[KAnonymity(10)], others="drop")
    anon = duckanon.connect(con)
    with bind(anon.workspace, "adult", pol, partitioning=True) as bound:
        dims = dimensions(as_engine(con), bound.counted, quasi, bound.hierarchies)
        partitioning = Mondrian(as_engine(con), bound.counted, dims, [], pol.models).run()
        groups = as_engine(con).frame(exp.select(exp.Star()).from_(partitioning.assignment.table))
        partitioning.close()
    # Every attribute spans its whole domain at the root: sex, race and marital-status have normalized span 1, as
    # has age; the first (age) is cut at its median, so no partition mixes ages on both sides of it.
    median = sorted(frame["age"])[math.ceil(len(frame) / 2) - 1]
    sides = groups.assign(low=groups["age"] <= median).groupby("group_id")["low"].nunique()
    assert (sides == 1).all()
    assert groups["records"].sum() == len(frame)


def test_the_sql_transpiles_to_spark():
    con = duckdb.connect()
    make_source(con, [(a % 17, c, z, s) for a, (c, z, s) in enumerate(
        [("red", "S", "a"), ("blue", "M", "b"), ("green", None, "c"), (None, "XL", "a")] * 10)])
    for relaxed in (False, True):
        for models in ([KAnonymity(3)], [KAnonymity(3), DistinctLDiversity("s", 2), TCloseness("s", 0.5)]):
            pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=models,
                         sensitive=["s"], insensitive=["id"])
            anon = duckanon.connect(con)
            with bind(anon.workspace, "t", pol, partitioning=True) as bound:
                dims = dimensions(as_engine(con), bound.counted, QUASI, bound.hierarchies, orders={"size": SIZES})
                partitioning = Mondrian(as_engine(con), bound.counted, dims, ["s"], models, relaxed=relaxed).run()
                partitioning.close()
            assert partitioning.sql
            for statement in partitioning.sql:
                assert statement.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)


def test_the_command_line_partitions_people(tmp_path):
    con = duckdb.connect()
    frame = make_people_source(con, [(a % 11, (a * 7) % 31, c, z, s) for a, (c, z, s) in enumerate(
        [("red", "S", "a"), ("blue", "M", "b"), ("green", "L", "c"), ("orange", "XL", "a")] * 12)])
    source, target = tmp_path / "visits.parquet", tmp_path / "r.parquet"
    frame.to_parquet(source)
    COLOR.to_arx_csv(tmp_path / "color.csv")
    assert run(["mondrian", str(source), "--qi", "age", "--qi", "color", "--hierarchies", str(tmp_path),
                "-k", "3", "--l-diversity", "s:2", "--insensitive", "id", "--insensitive", "pid", "--person", "pid",
                "--others", "drop", "-o", str(target)]) == 0
    released = pd.read_parquet(target)
    classes = released.groupby(["age", "color"])
    assert classes["pid"].nunique().min() >= 3 and classes["s"].nunique().min() >= 2
    assert (released.groupby("pid")[["age", "color"]].nunique() == 1).all().all() and verify(target).holds
    assert sorted(released["id"]) == sorted(frame["id"])


def test_the_sql_over_people_transpiles_to_spark():
    con = duckdb.connect()
    make_people_source(con, [(a % 13, a % 17, c, z, s) for a, (c, z, s) in enumerate(
        [("red", "S", "a"), ("blue", "M", "b"), ("green", None, "c"), (None, "XL", "a")] * 10)])
    for relaxed in (False, True):
        pol = policy(2, 2, 0.5, person="pid")
        with bind(duckanon.connect(con).workspace, "t", pol, partitioning=True) as bound:
            dims = dimensions(as_engine(con), bound.counted, QUASI, bound.hierarchies, orders={"size": SIZES})
            partitioning = Mondrian(as_engine(con), bound.counted, dims, ["s"], pol.models, relaxed=relaxed,
                                    person="pid").run()
            partitioning.close()
        assert partitioning.partitions > 1
        for statement in partitioning.sql:
            assert statement.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)


def test_numeric_columns_can_be_cut_along_their_hierarchy():
    con = duckdb.connect()
    frame = make_source(con, [(a, "red", "S", "a") for a in range(20)])
    decades = Hierarchy.intervals(range(0, 20), widths=[10], name="decades")
    pol = Policy(quasi_identifiers={"age": decades}, models=[KAnonymity(10)], sensitive=["s"], others="drop")
    anon = duckanon.connect(con)
    by_value = anon.mondrian("t", pol, styles={"age": "range"})
    along = anon.mondrian("t", pol, categorical=["age"])
    assert by_value.styles == {"age": "range"} and along.styles == {"age": "lca"}
    assert by_value.partitioning.partitions == along.partitioning.partitions == 2
    assert len(frame) == 20


# ------------------------------------------------------------------------------------------ over people
def make_people_source(con, rows) -> pd.DataFrame:
    """Records of people (``pid``): several rows may share a person, whose values differ from record to record."""
    frame = make_source(con, [row[1:] for row in rows])
    frame.insert(1, "pid", [row[0] for row in rows])
    con.register("frame", frame)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return frame


def person_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Each person's point, as Mondrian over people defines it: on each attribute the ⌈n/2⌉-th of the person's n
    records in the order of position (a number, a leaf's place among the hierarchy's leaves, a place in the order),
    NULL last."""
    positions, _ = leaf_positions(COLOR)
    place = {"age": float, "color": positions.__getitem__, "size": SIZES.index}
    points = []
    for pid, own in frame.groupby("pid", sort=True):
        point = {"pid": pid}
        for attribute in QUASI:
            values = [None if pd.isna(v) else v for v in own[attribute]]
            ranked = sorted(values, key=lambda v: (v is None, 0 if v is None else place[attribute](v)))
            point[attribute] = ranked[math.ceil(len(ranked) / 2) - 1]
        points.append(point)
    return pd.DataFrame(points).astype({"age": "Int64"})


def people_allowed(frame: pd.DataFrame, points: pd.DataFrame, k: int, l: int | None, t: float | None  # noqa: E741
                   ) -> Callable[[list[int]], bool]:
    """Whether a part of ``points`` satisfies the policy over people: k people, l distinct values among all their
    records, and the distribution of their distinct (person, value) pairs within t of the table's."""
    pairs = frame.assign(s=frame["s"].fillna(MISSING))[["pid", "s"]].drop_duplicates()
    table = pairs["s"].value_counts(normalize=True)

    def allowed(part: list[int]) -> bool:
        values = pairs.loc[pairs["pid"].isin(points.loc[part, "pid"]), "s"]
        if len(part) < k or (l is not None and values.nunique() < l):
            return False
        shares = values.value_counts(normalize=True).reindex(table.index, fill_value=0.0)
        return t is None or (shares - table).abs().sum() / 2 <= t + 1e-9

    return allowed


def check_people_release(frame: pd.DataFrame, released: pd.DataFrame, k: int, l: int | None,  # noqa: E741
                         t: float | None) -> None:
    """By pandas: every record once; each person in one class, whose people are k or more, with l distinct values and
    within t of the table, each person's value counted once."""
    assert sorted(released["id"]) == sorted(frame["id"])
    classes = keyed(released, QUASI).agg("|".join, axis=1)
    assert (classes.groupby(released["pid"]).nunique() == 1).all()
    pairs = pd.DataFrame({"class": classes, "pid": released["pid"], "s": released["s"].astype(object).fillna(MISSING)})
    assert pairs.groupby("class")["pid"].nunique().min() >= k
    distinct = pairs.drop_duplicates()
    if l:
        assert distinct.groupby("class")["s"].nunique().min() >= l
    if t:
        table = distinct[["pid", "s"]].drop_duplicates()["s"].value_counts(normalize=True)
        shares = (distinct.groupby("class")["s"].value_counts(normalize=True).unstack(fill_value=0.0)
                  .reindex(columns=table.index, fill_value=0.0))
        assert ((shares - table).abs().sum(axis=1) / 2).max() <= t + 1e-9


PEOPLE_RECORDS = st.lists(st.tuples(st.integers(0, 11), st.one_of(st.none(), st.integers(0, 30)),
                                    st.sampled_from(["red", "orange", "blue", "green", None]),
                                    st.sampled_from(SIZES + [None]),
                                    st.sampled_from(["a", "b", "c", None])), min_size=1, max_size=60)


def bad_people_input(frame: pd.DataFrame, k: int, l: int | None) -> bool:  # noqa: E741
    """Whether the documented checks must reject this input before any partitioning, counting people."""
    return k > frame["pid"].nunique() or bad_input(frame, 1, l)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=PEOPLE_RECORDS, k=st.integers(1, 4), l=st.sampled_from([None, 2]), t=st.sampled_from([None, None, 0.4]))
def test_strict_mondrian_over_people_finds_the_reference_partitions_of_people(rows, k, l, t,  # noqa: E741
                                                                                tmp_path_factory):
    con = duckdb.connect()
    frame = make_people_source(con, rows)
    pol = policy(k, l, t, person="pid")
    path = tmp_path_factory.mktemp("release") / "r.duckdb"
    anon = duckanon.connect(con)
    if refused(anon, pol, path, bad_people_input(frame, k, l)):
        return
    points = person_points(frame)
    people = reference_mondrian(points, k, l, t, allowed=people_allowed(frame, points, k, l, t), records=frame)
    partitions = [frozenset(frame.index[frame["pid"].isin(points.loc[sorted(part), "pid"])]) for part in people]
    result = anon.mondrian("t", pol, path, orders={"size": SIZES})
    assert result.partitioning.partitions == len(partitions)
    with duckdb.connect(str(path), read_only=True) as reader:
        released = reader.execute("SELECT * FROM release").df()
    # Each record with the generalized values of its person's partition, over all the partition's records.
    expected = expected_labels(frame, partitions).set_index("id").sort_index()
    got = released.set_index("id").sort_index()
    for attribute in [*QUASI, "age_low", "age_high"]:
        assert [None if pd.isna(v) else v for v in got[attribute]] == \
            [None if pd.isna(v) else v for v in expected[attribute].astype(object)], attribute
    check_people_release(frame, released, k, l, t)
    assert read_release_info(path)["policy"]["people"] == {"source": frame["pid"].nunique(), "suppressed": 0}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=PEOPLE_RECORDS, k=st.integers(1, 4), l=st.sampled_from([None, 2]), t=st.sampled_from([None, 0.4]))
def test_relaxed_mondrian_over_people_deals_out_whole_people(rows, k, l, t, tmp_path_factory):  # noqa: E741
    con = duckdb.connect()
    frame = make_people_source(con, rows)
    if bad_people_input(frame, k, l):
        return
    path = tmp_path_factory.mktemp("release") / "r.parquet"
    duckanon.connect(con).mondrian("t", policy(k, l, t, person="pid"), path, orders={"size": SIZES}, relaxed=True)
    check_people_release(frame, duckdb.connect().execute(f"SELECT * FROM '{path}'").df(), k, l, t)
    assert verify(path).holds


def test_a_person_with_many_records_is_never_a_class_alone(tmp_path):
    """Person 1 has four visits at 30, persons 2–4 one each at 31, 60 and 61; k = 2.  Counting records, the median
    of the seven ages is 30 and person 1's four records make a class alone; counting people, the median of the
    points 30, 31, 60, 61 is 31: [30, 31] holds persons 1 and 2, [60, 61] persons 3 and 4."""
    con = duckdb.connect()
    make_people_source(con, [(1, 30, "red", "S", "a")] * 4 + [(2, 31, "red", "S", "a"), (3, 60, "red", "S", "a"),
                                                               (4, 61, "red", "S", "a")])
    anon = duckanon.connect(con)
    by_records = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(2)], insensitive=["id", "pid"],
                        others="drop")
    by_people = dataclasses.replace(by_records, person="pid")
    for pol, expected in ((by_records, {"[30, 30]": {1}, "[31, 61]": {2, 3, 4}}),
                          (by_people, {"[30, 31]": {1, 2}, "[60, 61]": {3, 4}})):
        path = tmp_path / f"{pol.person}.parquet"
        anon.mondrian("t", pol, path)
        released = con.execute(f"SELECT age, pid FROM '{path}'").df()
        assert released.groupby("age")["pid"].agg(set).to_dict() == expected


# ------------------------------------------------------------------------------------------ bad input
@pytest.fixture
def small(con):
    make_source(con, [(a, c, z, s) for a, (c, z, s) in enumerate(
        [("red", "S", "a"), ("blue", "M", "b"), ("green", "L", "c"), ("orange", "XL", "a")] * 5)])
    return duckanon.connect(con)


@pytest.mark.parametrize("change, message", [
    ({"models": [KAnonymity(21)]}, "larger than the table"),
    ({"quasi_identifiers": {"age": None, "color": None, "size": None}}, "'color' has neither a hierarchy nor an order"),
    ({"models": [KAnonymity(2), DistinctLDiversity("s", 4)]}, "needs 4 distinct values"),
])
def test_bad_policies_are_refused_and_nothing_is_published(small, tmp_path, change, message):
    settings_ = dict(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(2)],
                     sensitive=["s"], insensitive=["id"])
    settings_.update(change)
    path = tmp_path / "r.duckdb"
    with pytest.raises(PolicyError, match=message):
        small.mondrian("t", Policy(**settings_), path, orders={"size": SIZES})
    assert not path.exists() and not list(tmp_path.iterdir())
    assert leftovers(small.con) == []


@pytest.mark.parametrize("column, sql, message", [
    ("age", "UPDATE t SET age = NULL", "'age' is NULL in every record"),
    ("age", "UPDATE t SET age = 7", "'age' has the same value in every record"),
    ("color", "UPDATE t SET color = 'red'", "'color' has the same value in every record"),
])
def test_all_null_and_constant_columns_are_refused(small, con, tmp_path, column, sql, message):
    con.execute(sql)
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(2)],
                 sensitive=["s"], insensitive=["id"])
    with pytest.raises(PolicyError, match=message):
        small.mondrian("t", pol, tmp_path / "r.duckdb", orders={"size": SIZES})
    assert not (tmp_path / "r.duckdb").exists()


def leftovers(con) -> list[str]:
    """Temporary tables a run left behind."""
    return [name for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]


def test_runs_leave_no_temporary_tables(small, tmp_path):
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(2)],
                 sensitive=["s"], insensitive=["id"])
    small.mondrian("t", pol, tmp_path / "r.duckdb", orders={"size": SIZES}, relaxed=True)
    assert leftovers(small.con) == []


def test_a_policy_the_whole_table_violates_is_refused(con, tmp_path):
    make_source(con, [(a, "red", "S", "a" if a else "b") for a in range(30)])
    pol = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(2), EntropyLDiversity("s", 2)],
                 sensitive=["s"], others="drop")
    with pytest.raises(PolicyNotSatisfied, match="the table as a whole violates"):
        duckanon.connect(con).mondrian("t", pol, tmp_path / "r.duckdb")
    assert not (tmp_path / "r.duckdb").exists() and leftovers(con) == []


def test_orders_and_styles_are_checked(small, tmp_path):
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(2)],
                 sensitive=["s"], insensitive=["id"])
    with pytest.raises(PolicyError, match="order of 'size' does not list its values 'XL'"):
        small.mondrian("t", pol, orders={"size": ["S", "M", "L"]})
    with pytest.raises(PolicyError, match="lists values twice"):
        small.mondrian("t", pol, orders={"size": ["S", "M", "L", "XL", "S"]})
    with pytest.raises(PolicyError, match="'mean' is for numbers"):
        small.mondrian("t", pol, orders={"size": SIZES}, styles={"color": "mean"})
    with pytest.raises(PolicyError, match="not quasi-identifiers"):
        small.mondrian("t", pol, orders={"size": SIZES, "s": ["a"]})


def test_full_domain_generalization_still_needs_hierarchies(small):
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR}, models=[KAnonymity(2)], sensitive=["s"],
                 others="drop")
    with pytest.raises(PolicyError, match=r"quasi-identifiers \['age'\] have no hierarchy"):
        small.search("t", pol)
    with pytest.raises(PolicyError, match="have no hierarchy"):
        small.publish("t", pol, {"color": 1}, "unused.duckdb")


def test_policies_without_hierarchies_are_stored_and_read_back(small):
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None},
                 models=[KAnonymity(2), TCloseness("s", 0.5)], sensitive=["s"], insensitive=["id"])
    small.save_policy("p", pol)
    back = small.policy("p")
    assert back.quasi_identifiers["age"] is None and back.quasi_identifiers["size"] is None
    assert back.quasi_identifiers["color"] == COLOR
    result = small.mondrian("t", "p", orders={"size": SIZES})
    assert result.metrics["suppressed"] == 0


def test_sensitive_models_hold_in_every_class_by_pandas(con, tmp_path):
    load_adult(con, "adult")
    con.execute("CREATE TABLE part AS SELECT * FROM adult WHERE education IN ('Bachelors', 'Masters', 'HS-grad')")
    quasi = ["age", "sex", "race", "marital-status"]
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi[1:]}
    alpha, t = 0.9, 0.3
    pol = Policy(quasi_identifiers={"age": None, **hierarchies}, sensitive=["salary-class"], others="drop",
                 models=[KAnonymity(5), duckanon.AlphaKAnonymity("salary-class", alpha, 5),
                         TCloseness("salary-class", t)])
    result = duckanon.connect(con).mondrian("part", pol, tmp_path / "r.duckdb", relaxed=True)
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        released = reader.execute("SELECT * FROM release").df()
    overall = released["salary-class"].value_counts(normalize=True)
    shares = released.groupby(quasi)["salary-class"].value_counts(normalize=True).unstack(fill_value=0.0)
    assert result.partitioning.partitions > 10
    assert released.groupby(quasi).size().min() >= 5
    assert shares.max(axis=1).max() <= alpha + 1e-9
    # Equal-distance EMD of a class: half the total variation distance from the table's distribution.
    emd = (shares - overall).abs().sum(axis=1) / 2
    assert emd.max() <= t + 1e-9


def test_a_hierarchy_row_for_null_places_missing_values(con, tmp_path):
    colors = Hierarchy.from_lists([["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"],
                                   [None, "cold", "*"]], name="colors_with_null")
    make_source(con, [(a, c, "S", "x") for a in range(4) for c in ["red", "orange", "blue", None] * 2])
    pol = Policy(quasi_identifiers={"color": colors}, models=[KAnonymity(9)], sensitive=["s"], others="drop")
    result = duckanon.connect(con).mondrian("t", pol, tmp_path / "r.duckdb")
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        released = reader.execute("SELECT color, COUNT(*) AS n FROM release GROUP BY color ORDER BY color").fetchall()
    # NULL lies under 'cold' beside 'blue': the cut along the hierarchy keeps them together.
    assert released == [("cold", 16), ("warm", 16)]
    assert result.partitioning.partitions == 2
