"""A policy that counts people (Policy(person=...)): every release recomputed with pandas (each signature shared by k
people, every record and person accounted for, suppression by whole person within a limit that counts people), the
search's verdicts held to the SQL check node by node, its optimum to a brute force over the lattice, the recipient's
verify, the view and the SQL macro to the same, and bad declarations refused by name."""

from __future__ import annotations

import dataclasses
import itertools
import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_macros import MACROS, needs_macros, release_verdicts

import duckanon
from duckanon import (
    AverageReidentificationRisk,
    DateShift,
    DeltaPresence,
    Hierarchy,
    JournalistNoAttackProfitability,
    JournalistProfitability,
    KAnonymity,
    KMap,
    Policy,
    PopulationUniqueness,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
    SampleUniqueness,
    verify,
)
from duckanon.cli import run
from duckanon.engine.duckdb_engine import DuckDBEngine
from duckanon.errors import PolicyError, PolicyNotSatisfied
from duckanon.privacy.models import (
    AlphaKAnonymity,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from duckanon.release.files import read_release_info
from duckanon.release.verify import guarantees
from duckanon.search.run import evaluator
from duckanon.sqlgen import build as sb

AGES = Hierarchy.intervals(range(100), widths=[10, 20, 40])
CODES = Hierarchy.from_mapping({c: [c[0] + "*", "*"] for c in ("a1", "a2", "b1", "b2", "c1")})


def records(people: list[int], seed: int, drift: int = 3) -> pd.DataFrame:
    """One row per record: ``people[i]`` records of person i, whose age drifts over their records, and a code."""
    rng = np.random.default_rng(seed)
    person = np.repeat(np.arange(len(people)), people)
    base = rng.integers(0, 95, len(people))[person]
    return pd.DataFrame({
        "row": np.arange(len(person)),
        "pid": person + 7000,
        "age": np.minimum(base + rng.integers(0, drift + 1, len(person)), 99),
        "code": rng.choice(["a1", "a2", "b1", "b2", "c1"], len(people))[person],
    })


def person_policy(k: int = 3, limit: float = 0.2, suppression: str = "replace", **changes) -> Policy:
    declared = {"quasi_identifiers": {"age": AGES, "code": CODES}, "models": [KAnonymity(k)],
                "insensitive": ["row", "pid"], "suppression": suppression, "suppression_limit": limit,
                "person": "pid"}
    return Policy(**{**declared, **changes})


def connected(frame: pd.DataFrame):
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE visits AS SELECT * FROM frame")
    return con, duckanon.connect(con)


def generalized(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """The records at ``levels``, by the hierarchies' own tables read in pandas."""
    out = frame.copy()
    for attribute, hierarchy in (("age", AGES), ("code", CODES)):
        mapping = {str(row[0]): row[levels[attribute]] for row in hierarchy.rows}
        out[attribute] = frame[attribute].astype(str).map(mapping)
    return out


def signature_sizes(frame: pd.DataFrame, quasi=("age", "code"), person="pid") -> pd.Series:
    """Per person, how many people share their set of classes (pandas)."""
    classes = frame[list(quasi)].astype(str).agg("\x1f".join, axis=1)
    signature = classes.groupby(frame[person]).agg(lambda c: frozenset(c))
    return signature.map(signature.value_counts())


def pandas_node(frame: pd.DataFrame, levels: dict[str, int], k: int, limit: float, replaced: bool
                ) -> tuple[bool, bool, int, int]:
    """(within the limit, satisfied, people suppressed, records suppressed) of a node, by the definition."""
    sizes = signature_sizes(generalized(frame, levels))
    exposed = set(sizes[sizes < k].index)
    people = len(exposed)
    within = people <= int(limit * frame["pid"].nunique() + 1e-9)
    satisfied = within and not (replaced and 0 < people < k)
    return within, satisfied, people, int(frame["pid"].isin(exposed).sum())


def check_release(frame: pd.DataFrame, released: pd.DataFrame, levels: dict[str, int], k: int, limit: float,
                  suppression: str) -> None:
    """The release is, row for row, what the definition makes of the source at ``levels`` (built here with pandas:
    people whose signature fewer than k people share suppressed whole), and it gives each signature k people."""
    expected = generalized(frame, levels)
    sizes = signature_sizes(expected)
    exposed = expected["pid"].isin(sizes[sizes < k].index)
    assert len(sizes[sizes < k]) <= int(limit * frame["pid"].nunique() + 1e-9)
    if suppression == "drop":
        expected = expected[~exposed]
    else:
        expected.loc[exposed, ["age", "code"]] = "*"
    columns = ["row", "pid", "age", "code"]
    pd.testing.assert_frame_equal(released[columns].sort_values("row").reset_index(drop=True),
                                  expected[columns].sort_values("row").reset_index(drop=True), check_dtype=False)
    checked = released
    if suppression == "replace-unchecked":
        checked = released[~(released[["age", "code"]] == "*").all(axis=1) | ~exposed.any()]
    if len(checked):
        assert signature_sizes(checked).min() >= k


PEOPLE = st.lists(st.integers(1, 50), min_size=4, max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(people=PEOPLE, seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4),
       suppression=st.sampled_from(["replace", "drop", "replace-unchecked"]), limit=st.sampled_from([0.0, 0.1, 0.3]))
def test_every_release_gives_each_signature_k_people_and_accounts_for_everyone(tmp_path_factory, people, seed, k,
                                                                              suppression, limit):
    frame = records(people, seed)
    con, anon = connected(frame)
    target = tmp_path_factory.mktemp("people") / "r.parquet"
    try:
        result, _ = anon.anonymize("visits", person_policy(k, limit, suppression), target)
    except PolicyNotSatisfied:
        return  # even the top node leaves too many people exposed: checked by the brute force below
    finally:
        con.close()
    check_release(frame, pd.read_parquet(target), result.levels, k, limit, suppression)
    assert verify(target).holds


@pytest.mark.parametrize("suppression", ["replace", "drop", "replace-unchecked"])
@pytest.mark.parametrize("seed", [3, 11])
def test_the_search_verdicts_equal_the_sql_check_and_pandas_at_every_node(seed, suppression):
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3], seed)
    con, anon = connected(frame)
    policy = person_policy(3, 0.25, suppression)
    with anon.encode("visits", policy) as encoded, evaluator(anon.workspace, encoded.bound, ["loss"], None,
                                                             encoding=encoded.encoding) as nodes:
        for index in range(nodes.lattice.size):
            levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
            result = nodes.evaluate(index)
            report = encoded.check(levels)
            within, satisfied, people, suppressed = pandas_node(frame, levels, 3, 0.25, suppression == "replace")
            assert (result.within_limit, bool(nodes.satisfies(index)), result.suppressed) == (
                within, satisfied, suppressed), levels
            assert (report.within_limit, report.violating_people, report.violating_records) == (
                within and not (suppression == "replace" and 0 < people < 3), people, suppressed), levels
    con.close()


def test_the_optimum_is_the_brute_forces(tmp_path):
    """DM* (Σ class sizes², suppression aside) is computed by pandas over every node: the search's optimum is the
    least among the nodes pandas finds satisfying."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 8, 8, 2], 5)
    con, anon = connected(frame)
    best = None
    for age, code in itertools.product(range(AGES.levels), range(CODES.levels)):
        levels = {"age": age, "code": code}
        _, satisfied, _, _ = pandas_node(frame, levels, 3, 0.1, True)
        if satisfied:
            sizes = generalized(frame, levels).groupby(["age", "code"]).size()
            value = float((sizes ** 2).sum())
            best = value if best is None else min(best, value)
    result = anon.search("visits", person_policy(3, 0.1), metric="dm-star")
    assert result.best.values["dm-star"] == best
    con.close()


@pytest.fixture(scope="module")
def longitudinal(tmp_path_factory):
    from duckanon.datasets import adult_hierarchy_dir
    from duckanon.datasets.longitudinal import load_adult_visits

    con = duckdb.connect()
    load_adult_visits(con)
    anon = duckanon.connect(con)
    quasi = ["age", "sex", "race", "marital-status"]
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi}
    folder = tmp_path_factory.mktemp("longitudinal")
    base = {"quasi_identifiers": hierarchies, "models": [KAnonymity(5)], "pseudonymize": ["patient_id"],
            "others": "drop", "suppression_limit": 0.05}
    by_records = anon.anonymize("adult_visits", Policy(**base), folder / "records.parquet")
    by_people = anon.anonymize("adult_visits", Policy(**base, person="patient_id"), folder / "people.duckdb")
    yield anon, quasi, folder, by_records, by_people
    con.close()


def test_on_longitudinal_adult_the_person_release_protects_whom_the_record_release_leaves_unique(longitudinal):
    anon, quasi, folder, _, by_people = longitudinal
    exposed = anon.person_exposure(folder / "records.parquet", quasi, "patient_id", 5)
    with duckdb.connect(str(by_people[1].path), read_only=True) as release:
        released = release.execute("SELECT * FROM release").df()
    anon.con.register("people_release", released)
    protected = anon.person_exposure("people_release", quasi, "patient_id", 5)
    assert exposed.unique_people > 0 and exposed.people_below_k > 0
    assert (protected.people_below_k, protected.unique_people, protected.people_in_small_classes) == (0, 0, 0)
    shown = released[~(released[quasi] == "*").all(axis=1)]
    sizes = signature_sizes(shown, quasi, "patient_id")
    starred = released[(released[quasi] == "*").all(axis=1)]["patient_id"].nunique()
    assert sizes.min() >= 5 and (starred == 0 or starred >= 5)
    info = read_release_info(by_people[1].path)
    assert info["policy"]["people"] == {"source": 30_162, "suppressed": starred}
    assert starred <= int(0.05 * 30_162)
    # The risk it claims is a person's: 1 / the people sharing their signature (the suppressed sharing theirs).
    everyone = signature_sizes(released, quasi, "patient_id")
    assert info["highest_risk"] == pytest.approx(1 / everyone.min())
    assert info["average_risk"] == pytest.approx((1 / everyone).mean())


def test_a_recipient_verifies_the_people_and_catches_a_person_made_unique(longitudinal, tmp_path):
    _, quasi, _, _, by_people = longitudinal
    path = by_people[1].path
    checks = verify(path).frame().set_index("guarantee")
    assert checks.loc["k-anonymity over people with k = 5 (by patient_id)", "holds"]
    assert checks["holds"].all()
    con = duckdb.connect(str(path), read_only=True)
    view = con.execute("SELECT guarantee, holds FROM release_verification").fetchall()
    assert ("k-anonymity over people with k = 5 (by patient_id)", True) in view and all(h for _, h in view)
    released = con.execute("SELECT * FROM release").df()
    con.close()
    # Two records of two classes A and B given to a new person: nobody else's signature is {A, B}.
    classes = released[quasi].astype(str).agg("|".join, axis=1)
    signatures = set(classes.groupby(released["patient_id"]).agg(frozenset))
    shown = sorted(set(classes[released["age"] != "*"]))
    first, second = next((a, b) for a, b in itertools.combinations(shown, 2) if frozenset((a, b)) not in signatures)
    moved = [classes.index[classes == first][0], classes.index[classes == second][0]]
    released.loc[moved, "patient_id"] = "someone else"
    tampered = duckdb.connect()
    tampered.register("tampered", released)
    checks = {c.guarantee: c for c in guarantees(DuckDBEngine(tampered), sb.table("tampered"),
                                                 read_release_info(path))}
    people = checks["k-anonymity over people with k = 5 (by patient_id)"]
    assert people.holds is False and "a signature fewer than 5 people share" in people.recomputed


@needs_macros
def test_the_sql_macro_verifies_the_people(longitudinal):
    rows, _ = release_verdicts(longitudinal[4][1].path)
    assert rows["k-anonymity over people (by patient_id)"] and all(rows.values())
    assert rows["at most 1508 people suppressed (replace)"]


def test_the_command_line_counts_people(tmp_path):
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3], 4)
    source = tmp_path / "visits.parquet"
    frame.to_parquet(source)
    for name, hierarchy in (("age", AGES), ("code", CODES)):
        hierarchy.to_arx_csv(tmp_path / f"{name}.csv")
    target = tmp_path / "r.parquet"
    code = run([str(source), "--qi", "age", "--qi", "code", "--hierarchies", str(tmp_path), "-k", "3",
                "--suppression-limit", "0.25", "--insensitive", "row", "--insensitive", "pid", "--person", "pid",
                "-o", str(target)])
    assert code == 0
    levels = read_release_info(target)["transformation"]["full-domain generalization"]
    check_release(frame, pd.read_parquet(target), levels, 3, 0.25, "replace")


def test_the_command_line_counts_people_for_a_model_of_values(tmp_path):
    """``--t-closeness`` with ``--person``: each person's diagnosis once per class and once in the table."""
    frame = diagnosed([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 8], 5)
    source = tmp_path / "visits.parquet"
    frame.to_parquet(source)
    for name, hierarchy in (("age", AGES), ("code", CODES)):
        hierarchy.to_arx_csv(tmp_path / f"{name}.csv")
    target = tmp_path / "r.parquet"
    assert run([str(source), "--qi", "age", "--qi", "code", "--hierarchies", str(tmp_path), "-k", "3",
                "--t-closeness", "dx:0.3", "--suppression-limit", "0.3", "--suppression", "drop",
                "--insensitive", "row", "--insensitive", "pid", "--person", "pid", "-o", str(target)]) == 0
    levels = read_release_info(target)["transformation"]["full-domain generalization"]
    released = pd.read_parquet(target)
    suppressed = settled(frame, levels, 3, [TCloseness("dx", 0.3)], drops=True)
    assert suppressed and set(released["pid"]) == set(frame["pid"]) - suppressed
    assert diverse_enough(released, TCloseness("dx", 0.3)).all() and verify(target).holds


def test_the_risk_report_of_a_policy_over_people_is_a_persons():
    """``Anonymizer.risk`` under person=: a person's risk is 1 / the people sharing their signature (pandas)."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3], 4)
    con, anon = connected(frame)
    levels = {"age": 1, "code": 1}
    report = anon.risk("visits", person_policy(), levels, threshold=3)
    sizes = signature_sizes(generalized(frame, levels))
    groups = sizes.value_counts().sort_index()  # people per group size
    assert report.unit == "people" and report.records == frame["pid"].nunique()
    assert report.classes == int((groups / groups.index).sum())
    assert report.highest_risk == pytest.approx(1 / sizes.min())
    assert report.average_risk == pytest.approx(report.classes / report.records)
    assert report.records_below_threshold == int((sizes < 3).sum())
    assert list(report.histogram["class_size"]) == list(groups.index)
    assert list(report.histogram["records"]) == list(groups)
    con.close()


def test_a_stored_policy_keeps_its_person():
    con = duckdb.connect()
    anon = duckanon.connect(con)
    declared = person_policy(pseudonymize=["pid"], insensitive=["row"])
    anon.save_policy("people", declared)
    assert anon.policy("people") == declared and anon.policy("people").person == "pid"


BAD = [
    (lambda: person_policy(insensitive=["row"], identifiers=["pid"]), "'pid' must be released", PolicyError),
    (lambda: person_policy(models=[DistinctLDiversity("row", 2)], insensitive=["pid"]), "needs KAnonymity .* or another model with a k",
     PolicyError),
    (lambda: person_policy(person=""), "person must name", PolicyError),
]


@pytest.mark.parametrize("build,message,error", BAD, ids=["dropped person", "no k", "empty"])
def test_bad_declarations_are_refused_by_name(build, message, error):
    with pytest.raises(error, match=message):
        build()


def test_bad_input_and_unsupported_paths_are_one_error_and_write_nothing(tmp_path):
    frame = records([2, 3, 4, 5], 1)
    frame["pid"] = frame["pid"].astype("Int64")
    frame.loc[2, "pid"] = pd.NA
    con, anon = connected(frame)
    with pytest.raises(PolicyError, match="'pid' is NULL in 1 records"):
        anon.anonymize("visits", person_policy(), tmp_path / "r.parquet")
    con.execute("UPDATE visits SET pid = 1 WHERE pid IS NULL")
    with pytest.raises(PolicyError, match="searched in process"):
        anon.search("visits", person_policy(), evaluator="sql")
    assert list(tmp_path.iterdir()) == []
    con.close()


def test_the_report_shows_the_people_and_their_verification(longitudinal, tmp_path):
    *_, by_people = longitudinal
    page = by_people[1].report(tmp_path / "people.html").read_text()
    info = read_release_info(by_people[1].path)
    assert "people suppressed" in page and f"{info['policy']['people']['suppressed']:,}" in page
    assert "highest prosecutor risk of a person" in page and "a person's prosecutor risk is 1 / the people" in page
    assert "k-anonymity over people with k = 5 (by patient_id)" in page


def test_a_date_shift_is_by_the_policys_person_unless_told_otherwise():
    declared = person_policy(insensitive=["row"], pseudonymize=["pid"], date_shift={"visit": DateShift(10)})
    assert declared.date_shift["visit"].by == "pid"
    with pytest.raises(PolicyError, match="date_shift of 'visit' names no person column"):
        Policy(quasi_identifiers={"age": AGES}, models=[KAnonymity(2)], insensitive=["pid"],
               date_shift={"visit": DateShift(10)})


def test_a_person_search_beyond_the_memory_budget_is_refused_before_any_work(tmp_path):
    frame = records([2, 3, 4, 5], 1)
    con, anon = connected(frame)
    with pytest.raises(PolicyError, match="above the memory budget"):
        anon.anonymize("visits", person_policy(), tmp_path / "r.parquet", memory_budget=1000)
    assert list(tmp_path.iterdir()) == []
    assert anon.search("visits", person_policy(), evaluator="memory", memory_budget=1000).found
    con.close()


# ------------------------------------------------------------------ l-diversity counting each person's value once
def diagnosed(people: list[int], seed: int) -> pd.DataFrame:
    """:func:`records` with a diagnosis per record: mostly one of the person's code (people of one code share it, so
    classes run short of values), else any."""
    frame = records(people, seed)
    rng = np.random.default_rng(seed + 1)
    usual = frame["code"].map({"a1": 0, "a2": 0, "b1": 1, "b2": 1, "c1": 2}).to_numpy()
    keeps = (rng.random((len(people), 2)) < 0.7)[frame["pid"] - 7000, rng.integers(0, 2, len(frame))]
    frame["dx"] = np.array(["flu", "cold", "asthma", "gout"])[np.where(keeps, usual, rng.integers(0, 4, len(frame)))]
    return frame


def diverse_enough(kept: pd.DataFrame, model, table: pd.DataFrame | None = None) -> pd.Series:
    """Per class of ``kept`` (generalized records), whether ``model`` holds with each person's value once per class
    (pandas over the distinct (class, person, value) rows) and, for a model that compares a class with its table,
    once in ``table`` (``kept`` when None)."""
    people = kept[["age", "code", "pid", "dx"]].drop_duplicates().groupby(["age", "code", "dx"]).size()
    if model.compares_with_table:
        table = kept if table is None else table
        return compared_with_table(people, table[["pid", "dx"]].drop_duplicates()["dx"].value_counts(), model)
    if isinstance(model, DistinctLDiversity):
        return people.groupby(level=[0, 1]).size() >= model.l
    shares = people / people.groupby(level=[0, 1]).transform("sum")
    if isinstance(model, EntropyLDiversity):
        return (-(shares * np.log(shares)).groupby(level=[0, 1]).sum()) >= np.log(model.l) - 1e-9
    if isinstance(model, AlphaKAnonymity):  # its k is a signature's, which every class of kept people meets
        return shares.groupby(level=[0, 1]).max() <= model.alpha
    if isinstance(model, PSensitiveKAnonymity):
        return people.groupby(level=[0, 1]).size() >= model.p
    ordered = people.groupby(level=[0, 1]).apply(lambda c: sorted(c.tolist(), reverse=True))
    return ordered.map(lambda c: c[0] < model.c * sum(c[model.l - 1:]))


DX_GROUPS = {"flu": "respiratory", "cold": "respiratory", "asthma": "respiratory", "gout": "joints"}
DX = Hierarchy.from_mapping({dx: [group, "*"] for dx, group in DX_GROUPS.items()})


def compared_with_table(people: pd.Series, table: pd.Series, model) -> pd.Series:
    """Per class (the index levels of ``people`` but its last, the value), whether ``model`` holds, by the papers'
    definitions: ``people`` holds each class's people per value, ``table`` the table's per value.  t-closeness: Li et
    al.'s earth mover's distances (equal: half the summed gaps; ordered: the summed running gaps over m - 1, values
    in text order; hierarchical over :data:`DX`: per inner node, its height over the tree's times the lesser of its
    children's positive and negative extras); β-likeness: Cao & Karras's relative gains; δ-disclosure: Brickell &
    Shmatikov's |log2 p/q| < δ."""
    q = table / table.sum()
    levels = list(range(people.index.nlevels - 1))

    def holds(cell: pd.Series) -> bool:
        p = (cell / cell.sum()).droplevel(levels)
        if isinstance(model, TCloseness):
            gap = p.reindex(sorted(q.index), fill_value=0.0) - q.reindex(sorted(q.index))
            if model.distance == "equal":
                distance = gap.abs().sum() / 2
            elif model.distance == "ordered":
                distance = gap.cumsum().abs().sum() / max(len(gap) - 1, 1)
            else:
                def lesser(extra: pd.Series) -> float:
                    return min(extra[extra > 0].sum(), -extra[extra < 0].sum())
                by_group = gap.groupby(DX_GROUPS)
                distance = by_group.apply(lesser).sum() / 2 + lesser(by_group.sum())
            return distance <= model.t + 1e-9
        shared = q[p.index]
        if isinstance(model, BasicBetaLikeness):
            return bool(((p - shared) / shared <= model.beta + 1e-9).all())
        if isinstance(model, EnhancedBetaLikeness):
            return bool(((p - shared) / shared <= np.minimum(model.beta, -np.log(shared)) + 1e-9).all())
        return bool((np.abs(np.log2(p / shared)) < model.delta - 1e-9).all())

    return people.groupby(level=levels).apply(holds)


def settled(frame: pd.DataFrame, levels: dict[str, int], k: int, models, rounds: list | None = None,
            drops: bool = False) -> set:
    """The people the policy suppresses at ``levels``, by the definition: round after round over the people left,
    those whose signature fewer than k people share and those in a class that violates a model, until none more
    (each round's new people appended to ``rounds``).  A model comparing a class with its table compares it with
    every person's values (replacement keeps them), or when ``drops`` with the people left."""
    out = generalized(frame, levels)
    suppressed: set = set()
    rounds = [] if rounds is None else rounds
    while True:
        kept = out[~out["pid"].isin(suppressed)]
        if kept.empty:  # everyone suppressed (and pandas before 2.1 groups nothing into a frame)
            return suppressed
        sizes = signature_sizes(kept)
        newly = set(sizes[sizes < k].index)
        for model in models:
            holds = diverse_enough(kept, model, kept if drops else out)
            bad = holds[~holds].index
            newly |= set(kept[kept.set_index(["age", "code"]).index.isin(bad)]["pid"])
        if not newly:
            return suppressed
        rounds.append(len(newly))
        suppressed |= newly


L_MODELS = [[DistinctLDiversity("dx", 2)], [EntropyLDiversity("dx", 1.6)], [RecursiveCLDiversity("dx", 2, 2)]]
# Models that compare a class with its table, each biting on diagnosed() data.
TABLE_MODELS = [[TCloseness("dx", 0.3)], [TCloseness("dx", 0.2, "ordered")], [TCloseness("dx", 0.2, "hierarchical", DX)],
                [BasicBetaLikeness("dx", 1.0)], [EnhancedBetaLikeness("dx", 1.0)], [DeltaDisclosurePrivacy("dx", 1.2)]]
# Models of values with a k, which a signature then needs (4 > the policy's k-anonymity's 3 for (α,k)).
K_MODELS = [[AlphaKAnonymity("dx", 0.5, 4)], [PSensitiveKAnonymity("dx", 3, 3)]]
VALUED_IDS = ["distinct", "entropy", "recursive", "t-equal", "t-ordered", "t-hierarchical", "basic-beta",
              "enhanced-beta", "delta-disclosure", "alpha-k", "p-sensitive"]


def signature_k(models) -> int:
    """The k of a signature under :func:`diverse_policy`: its k-anonymity's 3, or a model's larger k."""
    return max([3, *(getattr(m, "k", 0) for m in models)])


def diverse_policy(models, suppression: str = "replace", limit: float = 0.3) -> Policy:
    return person_policy(3, limit, suppression, models=[KAnonymity(3), *models], sensitive=["dx"])


@pytest.mark.parametrize("models", L_MODELS + TABLE_MODELS + K_MODELS, ids=VALUED_IDS)
@pytest.mark.parametrize("suppression", ["replace", "drop"])
def test_models_of_values_over_people_search_check_and_pandas_agree_at_every_node(models, suppression):
    frame = diagnosed([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 8], 5)
    con, anon = connected(frame)
    policy = diverse_policy(models, suppression)
    allowed = int(0.3 * frame["pid"].nunique() + 1e-9)
    cascades = 0  # nodes where people suppressed by a model leave classes that then violate
    bites = 0  # nodes where the model suppresses people whose signature k people share
    with anon.encode("visits", policy) as encoded, evaluator(anon.workspace, encoded.bound, ["loss"], None,
                                                             encoding=encoded.encoding) as nodes:
        for index in range(nodes.lattice.size):
            levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
            result, report = nodes.evaluate(index), encoded.check(levels)
            suppressed = settled(frame, levels, signature_k(models), models, rounds := [], suppression == "drop")
            cascades += len(rounds) > 1
            sizes = signature_sizes(generalized(frame, levels))
            bites += len(suppressed) > int((sizes < signature_k(models)).sum())
            records = int(frame["pid"].isin(suppressed).sum())
            assert (report.violating_people, report.violating_records) == (len(suppressed), records), levels
            assert (result.suppressed, result.within_limit) == (records, len(suppressed) <= allowed), levels
            assert bool(nodes.satisfies(index)) == report.within_limit, levels
    con.close()
    assert bites > 0 and (cascades > 0 or not isinstance(models[0], (DistinctLDiversity, EntropyLDiversity)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(people=PEOPLE, seed=st.integers(0, 2**32 - 1), models=st.sampled_from(L_MODELS + TABLE_MODELS + K_MODELS),
       suppression=st.sampled_from(["replace", "drop"]))
def test_every_release_of_a_model_of_values_over_people_is_the_definitions_and_verifies(tmp_path_factory, people, seed, models,
                                                                            suppression):
    frame = diagnosed(people, seed)
    con, anon = connected(frame)
    target = tmp_path_factory.mktemp("diverse") / "r.duckdb"
    try:
        result, release = anon.anonymize("visits", diverse_policy(models, suppression, 0.5), target)
    except PolicyNotSatisfied:
        return
    except PolicyError as error:  # data no release can make satisfy the model: too few values, or one too common
        assert "of all people's values" in str(error) or "distinct values but 'dx' has only" in str(error)
        return
    finally:
        con.close()
    with duckdb.connect(str(target), read_only=True) as written:
        released = written.execute("SELECT * FROM release").df()
        view = dict(written.execute("SELECT guarantee, holds FROM release_verification").fetchall())
    suppressed = settled(frame, result.levels, signature_k(models), models, drops=suppression == "drop")
    assert release.check.violating_people == len(suppressed)
    expected = generalized(frame, result.levels)
    hit = expected["pid"].isin(suppressed)
    if suppression == "drop":
        expected = expected[~hit]
    else:
        expected.loc[hit, ["age", "code"]] = "*"
    columns = ["row", "pid", "age", "code", "dx"]
    pd.testing.assert_frame_equal(released[columns].sort_values("row").reset_index(drop=True),
                                  expected[columns].sort_values("row").reset_index(drop=True), check_dtype=False)
    assert diverse_enough(released, models[0]).all()
    checks = verify(target).frame().set_index("guarantee")
    assert checks["holds"].all() and any(g.endswith(" over people") for g in checks.index)
    assert all(view.values()) and any(g.endswith(" over people") for g in view)


# Two classes of three people, one of whom visits six times with one diagnosis.  Over people each class holds three
# values once each: entropy ln 3 >= ln 2.5; against the table's people (flu 2, cold 2, asthma 1, gout 1 of 6) an
# equal distance of 1/6 <= 0.2.  Over records a class holds six, one and one: entropy 0.74 < ln 2.5; against the
# table's records (flu 7, cold 2, asthma 1, gout 6 of 16) a distance of 6/16 > 0.2.  And flu is 2 of the 6 people's
# values (every class's share at most 1/3 <= 0.4) but 7 of the 16 records, which no release may hold below 0.4.
COUNTED_ONCE = [(EntropyLDiversity("dx", 2.5), "entropy-l-diversity of dx with l = 2.5 over people"),
                (TCloseness("dx", 0.2), "t-closeness of dx with t = 0.2, distance = equal over people"),
                (AlphaKAnonymity("dx", 0.4, 3), "alpha-k-anonymity of dx with alpha = 0.4, k = 3 over people")]


@needs_macros
@pytest.mark.parametrize("model,guarantee", COUNTED_ONCE, ids=["entropy", "t-closeness", "alpha-k"])
def test_the_view_the_macro_and_verify_count_each_persons_value_once(tmp_path, model, guarantee):
    """The release counts people (see :data:`COUNTED_ONCE`), and every recomputation of it must too."""
    rows = [(pid, code, dx) for pid, code, dx, times in (
        (1, "a1", "flu", 6), (2, "a1", "cold", 1), (3, "a1", "asthma", 1),
        (4, "b1", "gout", 6), (5, "b1", "cold", 1), (6, "b1", "flu", 1)) for _ in range(times)]
    frame = pd.DataFrame({"row": range(len(rows)), "pid": [r[0] for r in rows], "age": 30,
                          "code": [r[1] for r in rows], "dx": [r[2] for r in rows]})
    con, anon = connected(frame)
    policy = diverse_policy([model], "replace", 0.0)
    result, _ = anon.anonymize("visits", policy, tmp_path / "r.duckdb")
    by_records = dataclasses.replace(policy, person=None)
    assert result.levels == {"age": 0, "code": 0}
    try:  # counting records, it would fail
        assert not anon.check("visits", by_records, result.levels).within_limit
    except PolicyError as error:
        assert "no release can satisfy alpha=0.4: value 'flu' of 'dx' makes up 0.4375 of all records" in str(error)
    con.close()
    shell, view = release_verdicts(tmp_path / "r.duckdb")
    assert all(shell.values()) and any(g.startswith(model.name) for g in shell)
    assert all(view.values()) and guarantee in view
    assert verify(tmp_path / "r.duckdb").holds


@needs_macros
def test_a_class_is_compared_with_each_persons_value_once_in_the_table(tmp_path):
    """Person 1 has a flu visit in both classes: A = {1 flu, 2 cold, 3 cold}, B = {1 flu, 4 flu, 5 cold}.  Each
    person's value once in the table: flu 2/5, cold 3/5, so B (flu 2/3) is 4/15 ≈ 0.267 away (equal distance) and
    fails t = 0.25.  Counting person 1's flu once per class, or each record, the table would be flu 1/2 and both
    classes 1/6 away.  The release generalizes code to '*'; the release with code left as it is (forged) fails verify, the
    view's recomputation and the macro alike."""
    visits = [(1, "a1", "flu"), (2, "a1", "cold"), (3, "a1", "cold"), (1, "b1", "flu"), (4, "b1", "flu"),
              (5, "b1", "cold")]
    frame = pd.DataFrame({"row": range(6), "pid": [v[0] for v in visits], "age": 30, "code": [v[1] for v in visits],
                          "dx": [v[2] for v in visits]})
    con, anon = connected(frame)
    policy = person_policy(1, 0.0, models=[KAnonymity(1), TCloseness("dx", 0.25)], sensitive=["dx"])
    assert anon.check("visits", dataclasses.replace(policy, person=None), {"age": 0, "code": 0}).within_limit
    assert not anon.check("visits", policy, {"age": 0, "code": 0}).within_limit
    result, _ = anon.anonymize("visits", policy, tmp_path / "r.duckdb")
    assert result.levels == {"age": 0, "code": 2}  # a* and b* still part A from B
    con.close()
    guarantee = "t-closeness of dx with t = 0.25, distance = equal over people"
    shell, view = release_verdicts(tmp_path / "r.duckdb")
    assert all(shell.values()) and view[guarantee]
    forged = duckdb.connect()
    forged.execute(MACROS.read_text(encoding="utf-8"))
    forged.execute(f"ATTACH '{tmp_path / 'r.duckdb'}' AS r (READ_ONLY)")
    forged.execute("CREATE SCHEMA f")
    forged.execute("CREATE TABLE f.release_info AS SELECT * FROM r.release_info")
    released = forged.execute("SELECT * FROM r.release ORDER BY row").df()
    released["code"] = frame["code"]
    forged.register("forged", released)
    forged.execute("CREATE TABLE f.release AS SELECT * FROM forged")
    macro = dict(forged.execute("SELECT guarantee, holds FROM anon_verify('f.release')").fetchall())
    checks = {c.guarantee: c.holds for c in guarantees(DuckDBEngine(forged), sb.table("release", "f"),
                                                        read_release_info(tmp_path / "r.duckdb"))}
    forged.close()
    assert macro['t-closeness {"distance":"equal","sensitive":"dx","t":0.25}'] is False
    assert checks[guarantee] is False and checks["k-anonymity over people with k = 1 (by pid)"]


@needs_macros
def test_k_map_estimated_over_people_asks_each_signature_for_k_prime_people(tmp_path):
    """20 people sampled from a population of 100 people: f = 0.2, and with k = 8 the zero-truncated Poisson of mean
    λ = 1.6 gives P(1 ≤ X ≤ m) / P(X ≥ 1) = 0.405, 0.728, 0.901, 0.970, 0.992 for m = 1 … 5: the least m reaching
    0.99 is 5, so k' = m + 1 = 6 people per signature.  Counted in records (219 of them) the population of 100 would
    be smaller than the sample."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 69], 5)
    assert len(frame) == 219
    con, anon = connected(frame)
    policy = person_policy(1, 0.3, models=[KAnonymity(1), KMap(8, population_size=100)])
    with pytest.raises(PolicyError, match=r"population_size=100 is smaller than the data \(219 records\)"):
        anon.check("visits", dataclasses.replace(policy, person=None), {"age": 0, "code": 0})
    with anon.encode("visits", policy) as encoded:
        assert encoded.bound.policy.person_k == 6
    result, _ = anon.anonymize("visits", policy, tmp_path / "r.duckdb")
    con.close()
    check_release(frame, duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True).execute(
        "SELECT * FROM release").df(), result.levels, 6, 0.3, "replace")
    checks = verify(tmp_path / "r.duckdb").frame().set_index("guarantee")
    assert checks.loc["k-anonymity over people with k = 6 (by pid)", "holds"] and checks["holds"].all()
    assert checks.loc["k-map's threshold derived from the source's people", "recomputed"] == "the source had 20"
    shell, view = release_verdicts(tmp_path / "r.duckdb")
    assert all(shell.values()) and all(view.values()) and view["k-anonymity over people with k = 6 (by pid)"]


def test_prosecutor_profitability_without_an_attack_asks_each_signature_for_its_k():
    """ARX's prosecutor profitability without an attack is k-anonymity with k = G/C + 1 (= 5 for G = 1000, C = 250):
    over people, a signature's k, as the attack pays against a person alone in a smaller signature group."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 69], 5)
    con, anon = connected(frame)
    policy = person_policy(1, 0.3, models=[KAnonymity(1), ProsecutorNoAttackProfitability(1000, 250)])
    with anon.encode("visits", policy) as encoded:
        assert encoded.bound.policy.person_k == 5
    result = anon.search("visits", policy)
    con.close()
    sizes = signature_sizes(generalized(frame, result.levels))
    assert int((sizes < 5).sum()) <= int(0.3 * 20) and result.found


def test_a_population_uniqueness_over_people_takes_a_population_of_people():
    """A population of 100 people holds a sample of 20 people, however many records they have (219)."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 69], 5)
    con, anon = connected(frame)
    policy = person_policy(2, 0.3, models=[KAnonymity(2), PopulationUniqueness(0.2, population_size=100)])
    assert anon.search("visits", policy).found
    with pytest.raises(PolicyError, match=r"population_size=19 is smaller than the data \(20 people\)"):
        anon.search("visits", person_policy(2, 0.3, models=[KAnonymity(2), PopulationUniqueness(0.2, 19)]))
    con.close()


# Risk thresholds over people: the figure of the signature groups (a person's risk), the smallest groups cut.
def average_risk_holds(threshold: float):
    return lambda groups: not groups or len(groups) / sum(groups) <= threshold


def uniques_hold(threshold: float):
    return lambda groups: not groups or sum(g == 1 for g in groups) / sum(groups) <= threshold


THRESHOLDS = [(2, AverageReidentificationRisk(0.2), average_risk_holds(0.2)),
              (1, SampleUniqueness(0.05), uniques_hold(0.05))]


def cut_by_groups(frame: pd.DataFrame, levels: dict[str, int], k: int, holds) -> tuple[set, bool]:
    """By the definition: the people whose signature fewer than k people share, then the smallest signature groups
    left (of one size, the group whose lowest pid comes first) until the groups left meet the threshold; and
    whether the release's groups (the suppressed people's own too, under replacement) meet it."""
    out = generalized(frame, levels)
    classes = out[["age", "code"]].astype(str).agg("\x1f".join, axis=1)
    signature = classes.groupby(out["pid"]).agg(frozenset)
    sizes = signature.map(signature.value_counts())
    suppressed = set(sizes[sizes < k].index)
    kept = signature[~signature.index.isin(suppressed)]
    groups = sorted((len(people), min(people), set(people)) for people in kept.groupby(kept).groups.values())
    cut = 0
    while not holds([g[0] for g in groups[cut:]]):
        cut += 1
    for _, _, people in groups[:cut]:
        suppressed |= people
    return suppressed, [g[0] for g in groups[cut:]]


@pytest.mark.parametrize("k,model,holds", THRESHOLDS, ids=["average-risk", "sample-uniqueness"])
@pytest.mark.parametrize("suppression", ["replace", "drop"])
def test_a_risk_threshold_over_people_cuts_the_smallest_signature_groups_alike_everywhere(k, model, holds,
                                                                                          suppression, tmp_path):
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 8] * 3, 5)
    con, anon = connected(frame)
    policy = person_policy(k, 0.4, suppression, models=[KAnonymity(k), model])
    allowed = int(0.4 * frame["pid"].nunique() + 1e-9)
    cuts = 0  # nodes where the threshold suppresses people whose signature k people share
    with anon.encode("visits", policy) as encoded, evaluator(anon.workspace, encoded.bound, ["loss"], None,
                                                             encoding=encoded.encoding) as nodes:
        for index in range(nodes.lattice.size):
            levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
            suppressed, left = cut_by_groups(frame, levels, k, holds)
            sizes = signature_sizes(generalized(frame, levels))
            cuts += len(suppressed) > int((sizes < k).sum())
            shown = left + ([len(suppressed)] if suppression == "replace" and suppressed else [])
            within = len(suppressed) <= allowed and holds(shown)
            satisfied = within and not (suppression == "replace" and 0 < len(suppressed) < k)
            hidden = int(frame["pid"].isin(suppressed).sum())
            result, report = nodes.evaluate(index), encoded.check(levels)
            assert (report.violating_people, report.violating_records) == (len(suppressed), hidden), levels
            assert (result.suppressed, bool(nodes.satisfies(index)), report.within_limit) == (
                hidden, satisfied, satisfied), levels
    assert cuts > 0
    result, release = anon.anonymize("visits", policy, tmp_path / "r.duckdb")
    con.close()
    suppressed, left = cut_by_groups(frame, result.levels, k, holds)
    assert release.check.violating_people == len(suppressed)
    checks = verify(tmp_path / "r.duckdb").frame().set_index("guarantee")
    over_people = [g for g in checks.index if g.startswith(model.name) and g.endswith(" over people")]
    assert checks["holds"].all() and len(over_people) == 1
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as written:
        view = dict(written.execute("SELECT guarantee, holds FROM release_verification").fetchall())
    assert view[over_people[0]] and all(view.values())


# Models counted in a population table, over people: a signature group's population is the population's people
# with that signature.
def population_of(frame: pd.DataFrame, extra: list[int], seed: int) -> pd.DataFrame:
    """The people of ``frame`` with all their records, and ``extra`` more people (ids from 9000) drawn alike."""
    others = records(extra, seed + 100)
    others["pid"] += 2000
    others["row"] += len(frame)
    return pd.concat([frame, others], ignore_index=True)


def with_population() -> tuple[pd.DataFrame, pd.DataFrame, duckdb.DuckDBPyConnection, duckanon.Anonymizer]:
    """20 people's visits, the population (those and 20 more people) as table ``population``, and a connection."""
    frame = records([1, 2, 5, 9, 3, 1, 14, 2, 7, 30, 4, 1, 2, 6, 50, 3, 4, 4, 2, 8], 5)
    population = population_of(frame, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4], 5)
    con, anon = connected(frame)
    con.register("population_frame", population)
    con.execute("CREATE TABLE population AS SELECT * FROM population_frame")
    return frame, population, con, anon


def population_settled(frame: pd.DataFrame, population: pd.DataFrame, levels: dict[str, int], k: int, model,
                       replaced: bool) -> tuple[set, bool, bool]:
    """By the definition: (the people suppressed, whether a population signature no data person has makes the node
    unmendable, whether the suppressed people's own group fails under replacement).  A person is suppressed when
    fewer than k people share their signature, or when the population people with their signature (P) fail the
    model: k-map P < k, δ-presence δ = G / P outside its range (G the data's people with it).  The suppressed could
    be anyone: their group's population is every population person."""
    data = signature_sizes(generalized(frame, levels))
    own = generalized(population, levels)
    classes = own[["age", "code"]].astype(str).agg("\x1f".join, axis=1)
    signature = classes.groupby(own["pid"]).agg(frozenset)
    people_with = signature.value_counts()
    mine = generalized(frame, levels)
    mine_signature = mine[["age", "code"]].astype(str).agg("\x1f".join, axis=1).groupby(mine["pid"]).agg(frozenset)
    shared = mine_signature.map(people_with).fillna(0)
    if isinstance(model, KMap):
        failing = shared < model.k
        unmendable = False
    else:
        delta = data / shared
        failing = (delta < model.delta_min) | (delta > model.delta_max)
        unmendable = model.delta_min > 0 and bool(set(people_with.index) - set(mine_signature))
    suppressed = set(data[(data < k) | failing].index)
    count, everyone = len(suppressed), len(signature)
    starred = replaced and count > 0 and (
        count < k or (everyone < model.k if isinstance(model, KMap)
                      else not model.delta_min <= count / everyone <= model.delta_max))
    return suppressed, unmendable, starred


def agrees_at(nodes, encoded, index: int, frame: pd.DataFrame, suppressed: set, within: bool, starred: bool) -> None:
    """At node ``index``, the in-process search and the SQL check suppress the people ``suppressed`` (and their
    records), and find the node ``within`` the limit, and satisfied unless the suppressed people's group fails
    (``starred``), as the definition does."""
    levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
    records_suppressed = int(frame["pid"].isin(suppressed).sum())
    result, report = nodes.evaluate(index), encoded.check(levels)
    assert (report.violating_people, report.violating_records) == (len(suppressed), records_suppressed), levels
    assert (result.suppressed, result.within_limit) == (records_suppressed, within), levels
    assert report.within_limit == (within and not starred), levels
    assert bool(nodes.satisfies(index)) == (within and not starred), levels


# ARX's journalist profitability without an attack is k-map with k = G/C + 1 = 5 here.
POPULATION_MODELS = [KMap(4, population="population"), DeltaPresence(0.0, 0.6, "population"),
                     DeltaPresence(0.2, 0.9, "population"), JournalistNoAttackProfitability(1000, 250, "population")]


@pytest.mark.parametrize("model", POPULATION_MODELS, ids=["k-map", "delta-presence", "delta-presence-min",
                                                          "journalist-no-attack"])
@pytest.mark.parametrize("suppression", ["replace", "drop"])
def test_population_models_over_people_search_check_and_pandas_agree_at_every_node(model, suppression):
    frame, population, con, anon = with_population()
    policy = person_policy(2, 0.4, suppression, models=[KAnonymity(2), model])
    allowed = int(0.4 * frame["pid"].nunique() + 1e-9)
    bites = unmendable_nodes = 0
    with anon.encode("visits", policy) as encoded, evaluator(anon.workspace, encoded.bound, ["loss"], None,
                                                             encoding=encoded.encoding) as nodes:
        for index in range(nodes.lattice.size):
            levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
            suppressed, unmendable, starred = population_settled(frame, population, levels, 2, model,
                                                                 suppression == "replace")
            sizes = signature_sizes(generalized(frame, levels))
            bites += len(suppressed) > int((sizes < 2).sum())
            unmendable_nodes += unmendable
            agrees_at(nodes, encoded, index, frame, suppressed, len(suppressed) <= allowed and not unmendable, starred)
    con.close()
    assert bites > 0 and (unmendable_nodes > 0) == (model.name == "delta-presence" and model.delta_min > 0)


@needs_macros
@pytest.mark.parametrize("model", POPULATION_MODELS[:2], ids=["k-map", "delta-presence"])
def test_a_release_of_a_population_model_over_people_is_the_definitions(tmp_path, model):
    frame, population, con, anon = with_population()
    policy = person_policy(2, 0.4, "replace", models=[KAnonymity(2), model], pseudonymize=["pid"],
                           insensitive=["row"])
    result, release = anon.anonymize("visits", policy, tmp_path / "r.duckdb")
    con.close()
    suppressed, _, _ = population_settled(frame, population, result.levels, 2, model, True)
    assert release.check.violating_people == len(suppressed) > 0
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as written:
        released = written.execute("SELECT * FROM release ORDER BY row").df()
    starred = set(frame.loc[(released[["age", "code"]] == "*").all(axis=1).to_numpy(), "pid"])
    assert starred == suppressed
    checks = verify(tmp_path / "r.duckdb").frame().set_index("guarantee")
    assert checks["holds"].dropna().all() and checks.loc["k-anonymity over people with k = 2 (by pid)", "holds"]
    # The population is no part of the release: its model is left unchecked there (holds NULL), the rest holds.
    shell, view = release_verdicts(tmp_path / "r.duckdb")
    assert False not in shell.values() and False not in view.values() and None in view.values()


def test_a_population_without_the_person_column_is_refused_by_name(tmp_path):
    frame = records([2, 3, 4, 5], 1)
    con, anon = connected(frame)
    con.execute("CREATE TABLE population AS SELECT age, code FROM visits")
    with pytest.raises(PolicyError, match="population table 'population' lacks the person column 'pid'"):
        anon.anonymize("visits", person_policy(models=[KAnonymity(2), KMap(3, population="population")]),
                       tmp_path / "r.parquet")
    assert list(tmp_path.iterdir()) == []
    con.close()


def test_the_command_line_counts_a_populations_people(tmp_path):
    """``--k-map K --population FILE --person``: a signature needs K population people who have it."""
    frame, population, con, _ = with_population()
    con.close()
    source, people = tmp_path / "visits.parquet", tmp_path / "population.parquet"
    frame.to_parquet(source)
    population.to_parquet(people)
    for name, hierarchy in (("age", AGES), ("code", CODES)):
        hierarchy.to_arx_csv(tmp_path / f"{name}.csv")
    target = tmp_path / "r.parquet"
    assert run([str(source), "--qi", "age", "--qi", "code", "--hierarchies", str(tmp_path), "-k", "2",
                "--k-map", "4", "--population", str(people), "--suppression-limit", "0.4", "--insensitive", "row",
                "--insensitive", "pid", "--person", "pid", "-o", str(target)]) == 0
    levels = read_release_info(target)["transformation"]["full-domain generalization"]
    released = pd.read_parquet(target)
    suppressed, _, _ = population_settled(frame, population, levels, 2, KMap(4, population="population"), True)
    assert set(released.loc[(released[["age", "code"]] == "*").all(axis=1), "pid"]) == suppressed and suppressed


# ------------------------------------------------------------------------------- profitability with an attack
TERMS = {"adversary_gain": 6.0, "adversary_cost": 2.0, "publisher_loss": 300.0, "publisher_benefit": 400.0}
# The ages' intervals as a table: a value's domain share is then the share of the rows under it (an interval
# hierarchy's is its width over the whole range, as ARX's DomainShareInterval).
AGES_LISTED = Hierarchy.from_lists([list(row) for row in AGES.rows], name="ages_listed")


def priced_settled(frame: pd.DataFrame, population: pd.DataFrame | None, levels: dict[str, int], k: int,
                   replaced: bool) -> tuple[set, bool]:
    """By ARX's definitions read over people: (the people suppressed, whether the suppressed people's own group fails
    under replacement).  A value's domain share is the share of its hierarchy's rows that generalize to it (one row
    for an original value); a class's IL = 1 + Σ log10 shares / log10 Π rows, clamped to [0, 1].  An adversary
    attacks a person, one of the n people sharing their signature (a journalist's: of the P population people with
    it, n where P = 0), and each of the person's records must pay: the group is priced by its costliest class,
    B × (1 − IL) − (G / n − C > 0 ? L / n : 0) > 0.  A person is suppressed when fewer than k people share their
    signature or their group does not pay; '*' values lose everything (IL = 1), so their group never pays."""
    mine = generalized(frame, levels)
    most = sum(math.log10(len(h.rows)) for h in (AGES_LISTED, CODES))
    logs = np.zeros(len(mine))
    for attribute, hierarchy in (("age", AGES_LISTED), ("code", CODES)):
        level = levels[attribute]
        covered = pd.Series([str(row[level]) for row in hierarchy.rows]).value_counts()
        logs += [math.log10((1 if level == 0 else covered[str(v)]) / len(hierarchy.rows)) for v in mine[attribute]]
    classes = mine[["age", "code"]].astype(str).agg("\x1f".join, axis=1)
    signature = classes.groupby(mine["pid"]).agg(frozenset)
    sizes = signature.map(signature.value_counts())
    loss = (np.clip(1 + pd.Series(logs, index=mine.index).groupby(mine["pid"]).max() / most, 0, 1))
    shared = sizes.astype(float)
    if population is not None:
        own = generalized(population, levels)
        theirs = own[["age", "code"]].astype(str).agg("\x1f".join, axis=1).groupby(own["pid"]).agg(frozenset)
        counted = signature.map(theirs.value_counts()).fillna(0)
        shared = counted.where(counted > 0, sizes).astype(float)
    success = 1 / shared
    attacked = TERMS["adversary_gain"] * success - TERMS["adversary_cost"] > 0
    payout = TERMS["publisher_benefit"] * (1 - loss) - np.where(attacked, TERMS["publisher_loss"] * success, 0.0)
    suppressed = set(sizes[(sizes < k) | ~(payout > 0)].index)
    return suppressed, replaced and len(suppressed) > 0  # a group of '*' values never pays


PRICED = [ProsecutorProfitability(**TERMS), JournalistProfitability(**TERMS, population="population")]


@pytest.mark.parametrize("model", PRICED, ids=["prosecutor", "journalist"])
@pytest.mark.parametrize("suppression", ["replace", "replace-unchecked", "drop"])
def test_profitability_with_an_attack_over_people_search_check_and_pandas_agree_at_every_node(model, suppression):
    frame, population, con, anon = with_population()
    policy = person_policy(2, 0.4, suppression, models=[KAnonymity(2), model],
                           quasi_identifiers={"age": AGES_LISTED, "code": CODES})
    allowed = int(0.4 * frame["pid"].nunique() + 1e-9)
    priced_out = 0
    with anon.encode("visits", policy) as encoded, evaluator(anon.workspace, encoded.bound, ["loss"], None,
                                                             encoding=encoded.encoding) as nodes:
        for index in range(nodes.lattice.size):
            levels = dict(zip(["age", "code"], nodes.lattice.node(index)))
            suppressed, starred = priced_settled(frame, population if model.population else None, levels, 2,
                                                 suppression == "replace")
            sizes = signature_sizes(generalized(frame, levels))
            priced_out += len(suppressed) > int((sizes < 2).sum())
            agrees_at(nodes, encoded, index, frame, suppressed, len(suppressed) <= allowed, starred)
    con.close()
    assert priced_out > 0


def test_a_release_priced_over_people_suppresses_whom_pandas_prices_out(tmp_path):
    frame, population, con, anon = with_population()
    policy = person_policy(2, 0.4, "drop", models=[KAnonymity(2), PRICED[1]], pseudonymize=["pid"],
                           insensitive=["row"], quasi_identifiers={"age": AGES_LISTED, "code": CODES})
    result, release = anon.anonymize("visits", policy, tmp_path / "r.parquet")
    con.close()
    suppressed, _ = priced_settled(frame, population, result.levels, 2, False)
    released = pd.read_parquet(tmp_path / "r.parquet")
    assert sorted(released["row"]) == sorted(frame.loc[~frame["pid"].isin(suppressed), "row"])
    assert release.check.violating_people == len(suppressed)
    checks = verify(tmp_path / "r.parquet").frame().set_index("guarantee")
    assert checks["holds"].dropna().all()
