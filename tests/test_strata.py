"""Strata: every model holds within each stratum as if it were a table of its own, one generalization for all.

Held to pandas: on random tables every node's suppressed records and verdict (k-anonymity, distinct l-diversity and
t-closeness against the stratum's distribution, replace and drop mode) are recomputed stratum by stratum with plain
group-bys, and must equal what both evaluators give; every release is checked again by pandas from its file (each
stratum's classes, its '*' class, its table for t-closeness, a risk threshold per stratum) and by the three
verifications (``duckanon.verify``, the release's view, the shell macro ``anon_verify``)."""

from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from search_data import LABEL, adult_setup, on_every_evaluator, setup_table, tables
from test_sql_macros import needs_macros, release_verdicts

import duckanon
from duckanon import (
    AverageReidentificationRisk,
    DistinctLDiversity,
    KAnonymity,
    KMap,
    Policy,
    PopulationUniqueness,
    TCloseness,
)
from duckanon.encode.binding import bind
from duckanon.errors import PolicyError
from duckanon.risk.population import DANKAR, ClassSizes, uniqueness_estimate
from duckanon.search import run as search_run

STRATUM = "region"
METRICS = ["loss", "dm", "ncp", "non-uniform-entropy", "arx-loss"]


def with_regions(frame: pd.DataFrame, regions: int, seed: int) -> pd.DataFrame:
    """``frame`` with a stratum column of ``regions`` values, unevenly drawn."""
    rng = np.random.default_rng(seed)
    frame = frame.copy()
    frame[STRATUM] = rng.choice([f"r{i}" for i in range(regions)], size=len(frame),
                                p=rng.dirichlet(np.full(regions, 3.0)))
    return frame


def generalized(frame: pd.DataFrame, hierarchies, node) -> pd.DataFrame:
    """The quasi-identifiers of ``frame`` on the node's levels, from each hierarchy's table."""
    out = frame.copy()
    for (attribute, hierarchy), level in zip(hierarchies.items(), node):
        table = hierarchy.to_frame()
        out[attribute] = frame[attribute].astype(str).map(dict(zip(table["level_0"], table[f"level_{level}"])))
        assert out[attribute].notna().all(), attribute
    return out


def violated(records: pd.DataFrame, quasi, models, table: pd.DataFrame) -> pd.Series:
    """Per class of ``records`` (by ``quasi``), whether it violates one of ``models``; t-closeness (equal distance)
    compares with ``table``'s distribution of the sensitive value."""
    groups = records.groupby(quasi, dropna=False)
    bad = groups.size() < 0
    for model in models:
        if isinstance(model, KAnonymity):
            bad |= groups.size() < model.k
        elif isinstance(model, DistinctLDiversity):
            bad |= groups[model.sensitive].nunique() < model.l
        else:
            shares = table[model.sensitive].value_counts(normalize=True)
            emd = groups[model.sensitive].apply(lambda v, q=shares: 0.5 * (
                v.value_counts(normalize=True).reindex(q.index, fill_value=0) - q).abs().sum())
            bad |= emd > model.t + 1e-9
    return bad


def stratum_verdict(records: pd.DataFrame, quasi, models, drops: bool) -> tuple[int, bool]:
    """(records suppressed, whether the suppressed records' own class violates) in one stratum: drop mode's
    fixed point against the records kept, or in replace mode the violating classes' records as one class."""
    kept = records
    while True:
        bad = violated(kept, quasi, models, kept if drops else records)
        if not bad.any():
            break
        keys = bad[bad].index
        inside = kept.set_index(quasi).index.isin(keys)
        if not drops:
            starred = kept[inside].assign(**{q: "*" for q in quasi})
            return int(inside.sum()), bool(violated(starred, quasi, models, records).any())
        kept = kept[~inside]
    return len(records) - len(kept), False


def pandas_nodes(frame, hierarchies, policy) -> dict[tuple, tuple[int, bool]]:
    """Per node: (records suppressed over all strata, whether the node satisfies the policy)."""
    quasi, allowed = list(hierarchies), policy.allowed_suppressed(len(frame))
    sizes = [h.levels for h in hierarchies.values()]
    answers = {}
    for node in np.ndindex(*sizes):
        recoded = generalized(frame, hierarchies, node)
        verdicts = [stratum_verdict(part, quasi, policy.models, policy.drops)
                    for _, part in recoded.groupby(STRATUM)]
        suppressed = sum(n for n, _ in verdicts)
        answers[tuple(int(v) for v in node)] = (suppressed, suppressed <= allowed
                                                and not any(bad for _, bad in verdicts))
    return answers


@st.composite
def stratified(draw, extras):
    """(frame, hierarchies, models): a random table with 1-3 regions, k-anonymity and one of ``extras`` (a model
    maker, or None for k alone)."""
    frame, hierarchies = draw(tables())
    frame = with_regions(frame, draw(st.integers(1, 3)), draw(st.integers(0, 2**31)))
    extra = draw(st.sampled_from(extras))
    return frame, hierarchies, [KAnonymity(draw(st.integers(2, 4))), *([] if extra is None else [extra(draw)])]


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
@on_every_evaluator
def test_every_node_matches_pandas_stratum_by_stratum(data, kind):
    frame, hierarchies, models = data.draw(stratified([
        None, lambda draw: DistinctLDiversity("s", 2),
        lambda draw: TCloseness("s", draw(st.sampled_from([0.2, 0.35])))]))
    policy = Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s"], insensitive=[LABEL],
                    strata=[STRATUM], suppression=data.draw(st.sampled_from(["replace", "drop"])),
                    suppression_limit=data.draw(st.sampled_from([0.05, 0.2, 0.5])))
    _, anon = setup_table(frame)
    try:
        with bind(anon.workspace, "t", policy) as bound, search_run.evaluator(anon.workspace, bound, METRICS,
                                                                               None, kind) as ev:
            ev.evaluate_many(list(range(ev.lattice.size)))
            engine = {ev.lattice.node(i): (ev.results[i].suppressed, ev.satisfies(i))
                      for i in range(ev.lattice.size)}
            values = {ev.lattice.node(i): ev.results[i].values for i in range(ev.lattice.size)}
    except PolicyError:
        assume(False)
    assert engine == pandas_nodes(frame, hierarchies, policy)
    # The metrics' bounds over summed totals still prune soundly: the optimal search finds the best satisfying node.
    for metric in METRICS:
        found = anon.search("t", policy, metric=metric, evaluator=kind)
        best = min((v[metric] for node, v in values.items() if engine[node][1]), default=None)
        assert found.found == (best is not None)
        if best is not None:
            assert found.best.values[metric] == pytest.approx(best, rel=1e-9, abs=1e-12), metric


def check_release(path, frame: pd.DataFrame, policy: Policy) -> pd.DataFrame:
    """The release at ``path`` (DuckDB) checked by pandas stratum by stratum: every record kept (or dropped, in drop
    mode) with its stratum, each stratum's classes (its '*' class among them in replace mode) satisfying the models
    against the stratum's released records; and by duckanon.verify, the release's view and the shell macro."""
    con = duckdb.connect(str(path), read_only=True)
    released = con.sql("SELECT * FROM release").df()
    con.close()
    quasi = list(policy.quasi_identifiers)
    if policy.drops:
        assert len(released) <= len(frame)
    else:
        assert len(released) == len(frame)
        pd.testing.assert_frame_equal(released[policy.strata].value_counts().sort_index().reset_index(),
                                      frame[policy.strata].value_counts().sort_index().reset_index())
    for _, part in released.groupby(policy.strata):
        counted = part
        if policy.suppression == "replace-unchecked":
            counted = part[~(part[quasi] == "*").all(axis=1)]
        plain = [m for m in policy.models if isinstance(m, (KAnonymity, DistinctLDiversity, TCloseness))]
        # t-closeness compares with every record the stratum releases ('*' ones included, as ARX's semantics say).
        assert not violated(counted, quasi, plain, part).any()
        for model in policy.models:
            if isinstance(model, AverageReidentificationRisk):  # the stratum's classes / its records
                assert counted.groupby(quasi).ngroups / len(counted) <= model.threshold + 1e-12
    verification = duckanon.verify(path)
    assert verification.holds, verification.summary()
    with duckdb.connect(str(path), read_only=True) as con:  # the view recomputes what plain SQL can, as it claims
        view = con.sql("SELECT guarantee, holds FROM release_verification").fetchall()
    assert all(holds is not False for _, holds in view), view
    return released


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_every_release_holds_in_each_stratum(data, tmp_path_factory):
    frame, hierarchies, models = data.draw(stratified([
        None, lambda draw: TCloseness("s", 0.35), lambda draw: AverageReidentificationRisk(0.4)]))
    policy = Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s"], insensitive=[LABEL],
                    strata=[STRATUM], suppression=data.draw(st.sampled_from(["replace", "drop", "replace-unchecked"])),
                    suppression_limit=0.5)
    _, anon = setup_table(frame)
    path = tmp_path_factory.mktemp("strata") / "release.duckdb"
    try:
        anon.anonymize("t", policy, path)
    except (PolicyError, duckanon.errors.PolicyNotSatisfied):
        assume(False)
    check_release(path, frame, policy)


@pytest.fixture(scope="module")
def adult():
    quasi = ["age", "marital-status", "education", "native-country", "workclass", "occupation"]
    con, anon, hierarchies = adult_setup(quasi)
    return con, anon, hierarchies


@needs_macros
def test_adult_t_closeness_within_each_sex(adult, tmp_path):
    """On Adult with sex as the stratum: each sex's classes are as close as t to that sex's salary distribution
    (which differs: 11 % of women and 31 % of men earn >50K), a closeness the unstratified release does not give."""
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5), TCloseness("salary-class", 0.15)],
                    strata=["sex"], suppression_limit=0.05, others="drop")
    memory, release = anon.anonymize("adult", policy, tmp_path / "strata.duckdb", evaluator="memory")
    sql = anon.search("adult", policy, evaluator="sql")
    assert memory.levels == sql.levels and memory.best.suppressed == sql.best.suppressed == release.suppressed
    # In process over the original values' codes alone, as a table beyond the memory budget is searched.
    lean = anon.search("adult", policy, evaluator="memory", memory_budget=1)
    assert lean.levels == sql.levels and lean.best.suppressed == sql.best.suppressed
    # The check of the chosen levels lists the violating classes by stratum and generalized values.
    checked = anon.check("adult", policy, memory.levels)
    assert checked.violating_records == release.suppressed and checked.within_limit
    assert list(checked.violations.columns[:2]) == ["sex", "age"]
    assert set(checked.violations["sex"]) <= {"Male", "Female"}
    assert checked.violations["age"].astype(str).str.contains("-|\\*").all()
    released = check_release(tmp_path / "strata.duckdb", con.sql("SELECT * FROM adult").df(), policy)
    assert set(released.columns) >= {"sex", "salary-class"}
    macro, view = release_verdicts(tmp_path / "strata.duckdb")
    assert all(macro.values()) and all(view.values()) and len(macro) == len(view)
    plain = dataclasses.replace(policy, strata=[])
    anon.anonymize("adult", plain, tmp_path / "plain.duckdb")
    rows = duckdb.connect(str(tmp_path / "plain.duckdb"), read_only=True).sql("SELECT * FROM release").df()
    rows = rows.assign(sex=con.sql("SELECT sex FROM adult").df()["sex"].to_numpy())
    quasi = list(hierarchies)
    # Within a sex, some class of the unstratified release strays more than t from that sex's distribution.
    assert any(violated(part, quasi, [TCloseness("salary-class", 0.15)], part).any()
               for _, part in rows.groupby("sex"))


def test_stratum_is_refused_where_not_reached(adult, tmp_path):
    _, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], strata=["sex"], suppression_limit=0.05,
                    others="drop")
    with pytest.raises(PolicyError, match="strata .*'sex'.* partitioning"):
        anon.mondrian("adult", policy, tmp_path / "m.parquet")
    with pytest.raises(PolicyError, match="population-uniqueness.* within strata \\['sex'\\] estimates each "
                                          "stratum's population .* use suppression='replace'"):
        anon.search("adult", dataclasses.replace(policy, models=[PopulationUniqueness(0.01, 10**6)],
                                                 suppression="drop"))
    with pytest.raises(PolicyError, match="metric arx-kl is not a sum over strata"):
        anon.search("adult", policy, metric="arx-kl")
    with pytest.raises(PolicyError, match="column 'sex' is given two roles: quasi-identifier and stratum"):
        Policy(quasi_identifiers={"sex": "sex"}, models=[KAnonymity(2)], strata=["sex"])
    with pytest.raises(PolicyError, match="strata takes a list"):
        Policy(quasi_identifiers={"age": "age"}, models=[KAnonymity(2)], strata="sex")
    with pytest.raises(PolicyError, match="names columns the source does not have: \\['region'\\]"):
        anon.search("adult", dataclasses.replace(policy, strata=["region"]))


def test_stored_policy_keeps_its_strata(adult):
    _, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], strata=["sex", "race"],
                    suppression_limit=0.05, others="drop")
    anon.save_policy("stratified", policy)
    assert anon.policy("stratified").strata == ["sex", "race"]


def test_the_report_counts_classes_within_strata(adult, tmp_path):
    """The report's risk counts a record's class within its stratum (the stratum is released): 1 / the records equal
    to it on the stratum and every quasi-identifier, by pandas from the file."""
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5), AverageReidentificationRisk(0.05)],
                    strata=["sex", "race"], suppression_limit=0.05, others="drop")
    _, release = anon.anonymize("adult", policy, tmp_path / "strata.duckdb")
    with duckdb.connect(str(tmp_path / "strata.duckdb"), read_only=True) as view:  # the threshold in every stratum
        assert view.sql("SELECT holds FROM release_verification WHERE guarantee LIKE 'average%'").fetchall() == [
            (True,)]
    release.report(tmp_path / "strata.html", tables=tmp_path / "report.duckdb")
    released = check_release(tmp_path / "strata.duckdb", con.sql("SELECT * FROM adult").df(), policy)
    sizes = released.groupby(["sex", "race", *hierarchies]).transform("size")
    with duckdb.connect(str(tmp_path / "report.duckdb"), read_only=True) as report:
        risk = report.sql("SELECT measure, release FROM report_risk").df().set_index("measure")["release"]
    assert risk["highest prosecutor risk"] == pytest.approx(1.0 / sizes.min()) == pytest.approx(0.2)
    assert risk["average prosecutor risk"] == pytest.approx(float(np.mean(1.0 / sizes)))
    assert "Every model holds within each stratum of sex, race" in (tmp_path / "strata.html").read_text()


def test_the_command_takes_strata(tmp_path, capsys):
    """``--stratum`` names a policy's stratum for every command; the release's classes are within each stratum."""
    from duckanon.cli import main
    from duckanon.datasets import adult_hierarchy_dir
    out = tmp_path / "release.parquet"
    args = ["-o", str(out), "--k", "5", "--suppression-limit", "0.05", "--others", "drop", "--stratum", "sex",
            "--hierarchies", str(adult_hierarchy_dir()), *[f"--qi={q}" for q in ["age", "race", "education"]]]
    assert main(args) == 0
    released = pd.read_parquet(out)
    assert "sex" in released.columns
    counted = released[~(released[["age", "race", "education"]] == "*").all(axis=1)]
    assert counted.groupby(["sex", "age", "race", "education"]).size().min() >= 5
    assert duckanon.verify(out).holds


def test_local_recoding_recodes_within_strata(adult, tmp_path):
    """Local recoding under strata: each step's search holds in each stratum, a combination's step is its own in each
    stratum, and the whole release holds in each stratum (pandas) and verifies."""
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], strata=["sex"], suppression_limit=0.05,
                    others="drop")
    recoding, release = anon.anonymize_locally("adult", policy, tmp_path / "local.duckdb")
    assert len(recoding.steps) > 1 and release.records_out == 30162
    released = check_release(tmp_path / "local.duckdb", con.sql("SELECT * FROM adult").df(), policy)
    assert int((released[list(hierarchies)] == "*").all(axis=1).sum()) == recoding.suppressed < recoding.steps[0].records - recoding.steps[0].released


def test_k_map_counts_each_stratums_population(adult, tmp_path):
    """k-map counted in a population table under strata: a released class's population is the population's records
    of its stratum with its generalized values (pandas, from the release and the population recoded at its levels),
    on both evaluators; a population without the stratum column is refused by name."""
    con, anon, hierarchies = adult
    con.execute("CREATE OR REPLACE TABLE strata_population AS SELECT * FROM adult UNION ALL "
                "SELECT * FROM adult WHERE sex = 'Male'")
    con.execute("CREATE OR REPLACE TABLE strata_sample AS SELECT * FROM adult USING SAMPLE 20% (bernoulli, 7)")
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(2), KMap(5, population="strata_population")],
                    strata=["sex"], suppression_limit=0.1, others="drop")
    found, release = anon.anonymize("strata_sample", policy, tmp_path / "kmap.duckdb")
    assert anon.search("strata_sample", policy, evaluator="sql").levels == found.levels
    released = check_release(tmp_path / "kmap.duckdb", con.sql("SELECT * FROM strata_sample").df(), policy)
    quasi = list(hierarchies)
    population = generalized(con.sql("SELECT * FROM strata_population").df(), hierarchies,
                             [found.levels[q] for q in quasi])
    counted = population.groupby(["sex", *quasi]).size()
    shown = released[~(released[quasi] == "*").all(axis=1)]
    keys = pd.MultiIndex.from_frame(shown[["sex", *quasi]].drop_duplicates())
    assert (counted.reindex(keys).fillna(0) >= 5).all() and release.suppressed > 0
    con.execute("CREATE OR REPLACE TABLE sexless AS SELECT * EXCLUDE (sex) FROM strata_population")
    with pytest.raises(PolicyError, match="population table 'sexless' lacks the strata \\['sex'\\]"):
        anon.search("strata_sample", dataclasses.replace(policy, models=[KMap(5, population="sexless")]))


def test_population_uniqueness_within_each_stratum(adult, tmp_path):
    """Population uniqueness within strata: each stratum's population is its share of the records (every stratum
    sampled alike), and its released classes ('*' among them) are estimated unique below the threshold there --
    recomputed here stratum by stratum from the file, on both evaluators."""
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[PopulationUniqueness(0.02, 300_000)], strata=["sex"],
                    suppression_limit=0.05, others="drop")
    found, _ = anon.anonymize("adult", policy, tmp_path / "unique.duckdb")
    assert anon.search("adult", policy, evaluator="sql").levels == found.levels
    released = check_release(tmp_path / "unique.duckdb", con.sql("SELECT * FROM adult").df(), policy)
    quasi = list(hierarchies)
    estimates = {}
    for sex, part in released.groupby("sex"):
        sizes = part.groupby(quasi).size().value_counts().sort_index()
        population = round(300_000 * len(part) / len(released))
        estimate = uniqueness_estimate(ClassSizes(sizes.index.to_numpy(), sizes.to_numpy()), population, DANKAR,
                                       zayatz_fallback=False)
        assert estimate.applicable and estimate.share <= 0.02
        estimates[sex] = estimate.share
    # The stratum's own population counts: over the whole population size the women's estimate would differ.
    women = released[released["sex"] == "Female"].groupby(quasi).size().value_counts().sort_index()
    whole = uniqueness_estimate(ClassSizes(women.index.to_numpy(), women.to_numpy()), 300_000, DANKAR,
                                zayatz_fallback=False)
    assert whole.share != pytest.approx(estimates["Female"], rel=0.05)
