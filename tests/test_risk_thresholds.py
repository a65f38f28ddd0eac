"""Risk thresholds (average re-identification risk, sample uniqueness, population uniqueness) as privacy models.

The cut (which of the smallest classes go) is held to brute force over class-size lists and to a literal transcription
of ARX's binary search; the thresholds' figures to hand computations and ARX's size threshold; on Adult the checks,
both evaluators and a published release are held to a pandas recomputation: generalize with the hierarchies' rows,
suppress the classes k-anonymity fails, then, while the threshold fails, the smallest class left (ties by the
generalized values), and compare the suppressed records, record by record in the release.  ARX's own test cases with
these models run in ``benchmarks/bench_arx_cases.py``.
"""

from __future__ import annotations

import collections
import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from search_data import adult_setup, on_every_evaluator

import duckanon
from duckanon import (
    AverageReidentificationRisk,
    KAnonymity,
    Policy,
    PolicyError,
    PopulationUniqueness,
    SampleUniqueness,
    TCloseness,
)
from duckanon.cli import main
from duckanon.encode.binding import bind
from duckanon.privacy.thresholds import cut, size_threshold
from duckanon.risk.population import ClassSizes, zayatz_uniqueness
from duckanon.search import run as search_run

QUASI = ["age", "sex", "race", "marital-status"]


# ----------------------------------------------------------------------------------------------- the cut
def histogram(sizes):
    counted = collections.Counter(sizes)
    ordered = sorted(counted)
    return np.array(ordered, dtype=np.int64), np.array([counted[s] for s in ordered], dtype=np.int64)


def fewest_smallest(threshold_holds, sizes):
    """The fewest of the smallest classes whose suppression leaves classes meeting the threshold, by trying every
    count."""
    ordered = sorted(sizes)
    return next(p for p in range(len(ordered) + 1) if threshold_holds(ordered[p:]))


def average_risk_holds(t):
    return lambda left: not left or len(left) / sum(left) <= t


def sample_uniqueness_holds(t):
    return lambda left: not left or sum(1 for s in left if s == 1) / sum(left) <= t


@settings(max_examples=200, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=60), t=st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3]))
def test_monotone_thresholds_cut_the_fewest_smallest_classes(sizes, t):
    for model, holds in ((AverageReidentificationRisk(t), average_risk_holds(t)),
                         (SampleUniqueness(t), sample_uniqueness_holds(t))):
        made = cut([model], np.array(sizes))
        expected = fewest_smallest(holds, sizes)
        assert made.classes == expected, (model, sizes)
        assert made.records == sum(sorted(sizes)[:expected])
        assert made.holds


@settings(max_examples=200, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 15), min_size=1, max_size=50), t=st.sampled_from([0.0, 0.02, 0.1, 0.25, 0.5]))
def test_thresholds_judge_every_cut_at_once_as_one_by_one(sizes, t):
    """The monotone thresholds' verdicts for every count of smallest classes gone (how the cut finds the fewest)
    are their verdicts on each histogram left: a release's verification recomputes the latter."""
    ordered = np.sort(np.array(sizes))
    for model in (AverageReidentificationRisk(t), AverageReidentificationRisk(max(t, 0.01), 0.3, t),
                  SampleUniqueness(t)):
        at_once = model.holds_after(ordered)
        one_by_one = [model.holds(*histogram(ordered[p:])) if p < len(ordered) else True
                      for p in range(len(ordered) + 1)]
        assert at_once.tolist() == one_by_one, model


def arx_binary_search(sizes, holds):
    """ARX 3.9.2's HashGroupifyDistribution.suppressWhileNotFulfilledBinary, transcribed statement by statement over a
    list of suppressed flags (the distribution recounted from them at every probe); returns the classes suppressed."""
    entries = sorted(sizes)
    suppressed = [False] * len(entries)

    def fulfilled():
        return holds([s for s, gone in zip(entries, suppressed) if not gone])

    if fulfilled():
        return 0
    low, high = 0, len(entries) - 1
    mid = (low + high) // 2
    for i in range(low, mid + 1):
        suppressed[i] = True
    while low <= high:
        if fulfilled():
            high = mid - 1
            mid = (low + high) // 2
            i = mid + 1
            while i < len(entries) and suppressed[i]:
                suppressed[i] = False
                i += 1
        else:
            low = mid + 1
            mid = (low + high) // 2
            for i in range(low, mid + 1):
                suppressed[i] = True
    if not fulfilled() and mid + 1 < len(entries) and not suppressed[mid + 1]:
        suppressed[mid + 1] = True
    return sum(suppressed)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=40), t=st.sampled_from([0.001, 0.01, 0.05]))
def test_population_uniqueness_cuts_where_arx_search_ends(sizes, t):
    model = PopulationUniqueness(t, 50 * len(sizes) * 12, "zayatz")

    def holds(left):
        return model.holds(*histogram(left)) if left else True

    assert cut([model], np.array(sizes)).classes == arx_binary_search(sizes, holds)


def test_thresholds_cut_in_turn():
    """A second threshold cuts on from where the first stopped, and its classes count against it."""
    sizes = [1, 1, 1, 2, 2, 3, 8, 20]
    made = cut([SampleUniqueness(0.05), AverageReidentificationRisk(0.2)], np.array(sizes))
    # Sample uniqueness: suppressing two of the three uniques leaves 1/36 <= 5 %.
    # Average risk then: 6 classes / 36 records = 0.167 <= 0.2, so nothing more goes.
    assert made.prefixes == (2, 2)
    made = cut([SampleUniqueness(0.05), AverageReidentificationRisk(0.1)], np.array(sizes))
    # 0.1 needs average size 10: [8, 20] is 2/28 = 0.071, [3, 8, 20] is 0.097, [2, 3, 8, 20] 0.121.
    assert made.prefixes == (2, 5) and made.records == 1 + 1 + 1 + 2 + 2


def test_size_threshold_as_arx():
    """ParameterTranslation.getSizeThreshold: 1/risk rounded down, up where that size's risk exceeds the risk by 1 %
    of it or more."""
    assert size_threshold(0.2) == 5
    assert size_threshold(0.3) == 4  # 1/3 - 0.3 = 0.033 >= 0.003
    assert size_threshold(0.33) == 4  # 1/3 - 0.33 = 0.0033 >= 0.0033
    assert size_threshold(0.333) == 3  # 1/3 - 0.333 = 0.00033 < 0.00333
    assert size_threshold(0.0) == 2**31 - 1


def test_average_risk_with_records_at_risk_by_hand():
    sizes, counts = histogram([2, 2, 4, 12])  # 20 records, 4 classes: average risk 0.2
    assert AverageReidentificationRisk(0.2).holds(sizes, counts)
    assert not AverageReidentificationRisk(0.19).holds(sizes, counts)
    # highest risk 0.3: classes below size 4 are at risk, 4 of 20 records (0.2)
    assert AverageReidentificationRisk(0.2, 0.3, 0.2).holds(sizes, counts)
    assert not AverageReidentificationRisk(0.2, 0.3, 0.19).holds(sizes, counts)


def test_population_uniqueness_as_arx_decides():
    """An estimate of 0 holds only without sample uniques; a positive one at most the threshold."""
    no_uniques = histogram([2, 3, 3])
    assert PopulationUniqueness(0.0, 1000, "zayatz").holds(*no_uniques)
    sample = histogram([1, 1, 2, 5, 9])
    share = zayatz_uniqueness(ClassSizes(*sample), 1000).share
    assert share > 0
    assert PopulationUniqueness(share, 1000, "zayatz").holds(*sample)
    assert not PopulationUniqueness(share * 0.99, 1000, "zayatz").holds(*sample)


@pytest.mark.parametrize("make, message", [
    (lambda: AverageReidentificationRisk(1.5), "threshold"),
    (lambda: AverageReidentificationRisk(0.1, highest_risk=0.2), "highest_risk and records_at_risk together"),
    (lambda: SampleUniqueness(-0.1), "threshold"),
    (lambda: PopulationUniqueness(0.01, 0), "population_size"),
    (lambda: PopulationUniqueness(0.01, 1000, "poisson"), "unknown estimator 'poisson'"),
    (lambda: PopulationUniqueness(0.01, 1000, solver_steps=0), "solver_steps"),
])
def test_bad_parameters_are_named(make, message):
    with pytest.raises(PolicyError, match=message):
        make()


# ----------------------------------------------------------------------------------------------- on Adult
@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(QUASI)
    con.execute("CREATE TABLE sample AS SELECT * FROM adult USING SAMPLE 4000 ROWS (reservoir, 7)")
    frame = con.execute("SELECT * FROM sample").df()
    yield con, anon, {q: hierarchies[q] for q in QUASI}, frame
    con.close()


def generalized(frame, hierarchies, levels):
    out = frame.copy()
    for q, level in levels.items():
        path = {row[0]: row for row in hierarchies[q].rows}
        out[q] = [value if level == 0 else path[str(value)][level] for value in frame[q]]
    return out


def expected_suppression(frame, hierarchies, levels, k, holds_on_sizes):
    """Per record, whether it is suppressed: classes below k first, then the smallest classes left (ties by their
    generalized values, as they sort) until ``holds_on_sizes`` holds; and whether the threshold holds after."""
    table = generalized(frame, hierarchies, levels)
    sizes = table.groupby(QUASI).size().rename("size").reset_index()
    kept = sizes[sizes["size"] >= k].sort_values(["size", *QUASI], kind="stable")
    gone = sizes[sizes["size"] < k]
    left = list(kept["size"])
    p = next((p for p in range(len(left) + 1) if holds_on_sizes(left[p:])), len(left))
    suppressed_classes = pd.concat([gone, kept.iloc[:p]])
    marked = table.merge(suppressed_classes[QUASI].assign(__gone=True), on=QUASI, how="left")["__gone"]
    return marked.fillna(False).astype(bool).to_numpy(), table


NODES = [{"age": a, "sex": s, "race": r, "marital-status": m} for a, s, r, m in
         [(0, 0, 0, 0), (1, 0, 0, 1), (1, 1, 1, 0), (2, 0, 1, 1), (3, 1, 0, 2), (4, 0, 0, 0)]]
THRESHOLDS = [("average risk 0.1", lambda: AverageReidentificationRisk(0.1), average_risk_holds(0.1)),
              ("average risk 0.3", lambda: AverageReidentificationRisk(0.3), average_risk_holds(0.3)),
              ("sample uniqueness 0.02", lambda: SampleUniqueness(0.02), sample_uniqueness_holds(0.02))]


def pandas_dm(marked, table):
    """DM: each kept record counts its class's size, each suppressed one the whole table's."""
    kept = table[~marked]
    sizes = kept.groupby(QUASI).size()
    return float((sizes ** 2).sum() + len(table) * marked.sum())


@pytest.mark.parametrize("name, make, holds", THRESHOLDS, ids=[t[0] for t in THRESHOLDS])
@pytest.mark.parametrize("k", [1, 2])
def test_checks_and_evaluators_suppress_what_pandas_does(adult, name, make, holds, k):
    _, anon, hierarchies, frame = adult
    models = [make()] if k == 1 else [KAnonymity(k), make()]
    policy = Policy(quasi_identifiers=hierarchies, models=models, suppression_limit=1.0, others="insensitive",
                    suppression="replace-unchecked")
    with bind(anon.workspace, "sample", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, ["dm"], None, "sql") as sql, \
            search_run.evaluator(anon.workspace, bound, ["dm"], None, "memory") as memory:
        for levels in NODES:
            marked, table = expected_suppression(frame, hierarchies, levels, k, holds)
            report = anon.check("sample", policy, levels)
            assert report.violating_records == marked.sum(), (levels, name)
            node = tuple(levels[q] for q in QUASI)
            for ev in (sql, memory):
                result = ev.evaluate(ev.lattice.index(node))
                assert (result.suppressed, result.values["dm"]) == (marked.sum(), pandas_dm(marked, table)), \
                    (type(ev).__name__, levels, name)
            # Which classes: the in-process evaluator's suppressed classes, their codes read as values
            classes = memory._classes(np.asarray(node))
            codes = [column[classes.violated] for column in classes.classes.unpacker()()]
            labels = [bound_labels(memory, i, levels[q]) for i, q in enumerate(QUASI)]
            ours = {tuple(labels[i][int(c) + 1] for i, c in enumerate(row)) for row in zip(*codes)}  # 0-based
            theirs = set(map(tuple, table[marked][QUASI].astype(str).drop_duplicates().to_numpy()))
            assert ours == theirs, (levels, name)


def bound_labels(evaluator, attribute, level):
    """Code -> generalized value (as text) of one attribute at one level."""
    return {code: str(label) for code, label in evaluator.encoding.labels(attribute, level).items()}


@pytest.mark.parametrize("mode", ["replace-unchecked", "drop", "replace"])
@pytest.mark.parametrize("name, make, holds", THRESHOLDS, ids=[t[0] for t in THRESHOLDS])
def test_published_release_suppresses_what_pandas_does(adult, tmp_path, mode, name, make, holds):
    """Every node's release: the records pandas keeps are released as generalized, the others '*' (or gone), and the
    release verifies, the threshold recomputed from its classes."""
    _, anon, hierarchies, frame = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[make()], suppression_limit=1.0, others="insensitive",
                    suppression=mode)
    for number, levels in enumerate(NODES):
        marked, table = expected_suppression(frame, hierarchies, levels, 1, holds)
        path = tmp_path / f"{number}.duckdb"
        try:
            release = anon.publish("sample", policy, levels, path)
        except duckanon.PolicyNotSatisfied:
            # only replace mode may refuse: the '*' class of the suppressed records is a class the threshold counts
            assert mode == "replace" and marked.any()
            starred = [*table[~marked].groupby(QUASI).size(), int(marked.sum())]
            assert not holds(starred)
            continue
        assert release.suppressed == marked.sum()
        with duckdb.connect(str(path), read_only=True) as reader:
            released = reader.execute("SELECT * FROM release").df()
        columns = list(frame.columns)
        shown = released[columns].astype(str)
        starred = (shown[QUASI] == "*").all(axis=1)
        assert starred.sum() == (0 if mode == "drop" else marked.sum())
        assert len(released) == len(frame) - (marked.sum() if mode == "drop" else 0)
        kept = table[~marked][columns].astype(str)
        pd.testing.assert_frame_equal(
            shown[~starred].sort_values(columns).reset_index(drop=True),
            kept.sort_values(columns).reset_index(drop=True), check_dtype=False)
        verification = duckanon.verify(path)
        assert verification.holds, verification.summary()
        if mode == "replace" and marked.any():
            assert holds([*table[~marked].groupby(QUASI).size(), int(marked.sum())])


@on_every_evaluator
def test_search_finds_the_least_dm_node_pandas_accepts(adult, kind):
    """The optimal search under average risk at most 0.1 and 2 % suppression returns the node of least DM among
    those pandas accepts (the monotonicity the search prunes by holds)."""
    _, anon, hierarchies, frame = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[AverageReidentificationRisk(0.1)], suppression_limit=0.02,
                    others="insensitive", suppression="replace-unchecked")
    found = anon.search("sample", policy, metric="dm", evaluator=kind)
    best = None
    heights = [hierarchies[q].levels for q in QUASI]
    for node in np.ndindex(*heights):
        levels = dict(zip(QUASI, node))
        marked, table = expected_suppression(frame, hierarchies, levels, 1, average_risk_holds(0.1))
        if marked.sum() <= math.floor(0.02 * len(frame)):
            value = pandas_dm(marked, table)
            best = min(best or (value, node), (value, node))
    assert found.best is not None and found.best.values["dm"] == best[0]


def test_cli_takes_risk_thresholds(tmp_path):
    """--average-risk, --sample-uniqueness and --population-uniqueness on the bundled data (k = 5 with them): the
    release verifies, each threshold recomputed; a malformed value is refused by name."""
    out = tmp_path / "release.duckdb"
    assert main(["-o", str(out), "--average-risk", "0.05", "--sample-uniqueness", "0.01",
                 "--population-uniqueness", "0.01:300000000:zayatz", "--metric", "dm"]) == 0
    verification = duckanon.verify(out)
    assert verification.holds, verification.summary()
    checked = verification.frame()
    for name in ("average-reidentification-risk", "sample-uniqueness", "population-uniqueness"):
        assert checked["guarantee"].str.startswith(name).any(), checked
    assert main(["-o", str(tmp_path / "x.duckdb"), "--population-uniqueness", "0.01"]) == 2


@pytest.mark.parametrize("t", [0.05, 0.1, 0.2])
def test_drop_mode_cuts_and_settles_until_neither_marks_more(adult, tmp_path, t):
    """Dropping the classes a cut takes moves the table t-closeness compares with, so classes kept may violate it
    then: checks, both evaluators and publishing settle and cut in turn to one fixed point, and every release
    verifies (at t = 0.1 the node at the bottom released a table t-closeness failed before they did)."""
    _, anon, hierarchies, _ = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[TCloseness("salary-class", t),
                                                           AverageReidentificationRisk(0.1)],
                    sensitive=["salary-class"], others="insensitive", suppression="drop", suppression_limit=1.0)
    with bind(anon.workspace, "sample", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, ["dm"], None, "sql") as sql, \
            search_run.evaluator(anon.workspace, bound, ["dm"], None, "memory") as memory:
        for number, levels in enumerate(NODES):
            index = sql.lattice.index(tuple(levels[q] for q in QUASI))
            suppressed = sql.evaluate(index).suppressed
            assert memory.evaluate(index).suppressed == suppressed, levels
            assert anon.check("sample", policy, levels).violating_records == suppressed, levels
            path = tmp_path / f"{number}.duckdb"
            assert anon.publish("sample", policy, levels, path).suppressed == suppressed, levels
            assert duckanon.verify(path).holds, levels
