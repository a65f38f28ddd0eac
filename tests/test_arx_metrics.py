"""ARX's metrics (``arx-loss`` and its rank aggregation, ``dm-star``, ``arx-entropy``, ``arx-nm-entropy``, precision,
height, entropy-based information loss, ambiguity, AECS with a gs-factor; ARX's AECS and non-monotone DM being
duckanon's ``average-class-size`` and ``dm``) against the values ARX's own tests expect (TestUtilityMetrics: every node it lists, under each of its policies, δ-presence on its research subset
included), and against a pandas computation of
ARX's definitions written here from its sources (``metric/v2/MetricMDNMLoss``, ``DomainShareMaterialized``,
``ILMultiDimensional*``, ``MetricSDDiscernability``, ``MetricMDNUEntropyPrecomputed``,
``MetricMDNUNMEntropyPrecomputed``)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import DeltaPresence, Hierarchy, KAnonymity, Policy, RecursiveCLDiversity, TCloseness
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.search import run as search_run
from duckanon.utility.metrics import (
    AGGREGATIONS,
    ArxAmbiguity,
    ArxAverageClassSize,
    ArxEntropyBasedInformationLoss,
    ArxKLDivergence,
    ArxLoss,
    ArxNonMonotoneEntropy,
    ArxNonUniformEntropy,
    ArxPublisherPayout,
    DiscernibilityStar,
    RankedLoss,
)
from search_data import ADULT_QIS, on_every_evaluator, setup_table, tables

ARX_VALUES = json.loads((Path(__file__).parent / "data" / "arx_utility_metrics.json").read_text(encoding="utf-8"))
# ARX's tests list transformations over its QIs in its data's column order, occupation left out when it is sensitive.
ARX_EIGHT = [q for q in ADULT_QIS if q != "occupation"]


@pytest.fixture(scope="module")
def adult():
    con = duckdb.connect()
    load_adult(con, "adult")
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in ADULT_QIS}
    yield con, con.execute("SELECT * FROM adult").df(), hierarchies
    con.close()


def evaluate(con, hierarchies, qis, models, limit, metrics, nodes, kind, source="adult", suppression="replace"):
    """``metrics``' values and bounds at ``nodes`` (levels in ``qis`` order) from one evaluator of ``kind``."""
    policy = Policy(quasi_identifiers={q: hierarchies[q] for q in qis}, models=models, suppression_limit=limit,
                    others="insensitive", suppression=suppression)
    workspace = duckanon.connect(con).workspace
    with bind(workspace, source, policy) as bound, \
            search_run.evaluator(workspace, bound, metrics, None, kind=kind) as evaluator:
        indices = [evaluator.lattice.index(tuple(node)) for node in nodes]
        evaluator.evaluate_many(indices)
        return [evaluator.results[i] for i in indices]


# --------------------------------------------------------------------------- ARX's own expected values
# TestAnonymizationGenetic/Heuristic/HeuristicTopDown cases 0, 2 and 4: the Loss ARX expects at the node it returns,
# k = 5 over nine quasi-identifiers.  (node in ADULT_QIS order, gs-factor, suppression limit, ARX's Loss)
ARX_LOSS_CASES = [
    ((0, 3, 0, 0, 2, 1, 1, 1, 0), 0.5, 1.0, 0.22041192847984292),
    ((0, 3, 0, 0, 0, 0, 0, 0, 0), 0.1, 1.0, 0.09257312971977383),
    ((0, 3, 0, 1, 1, 1, 1, 2, 0), 0.5, 0.04, 0.26611081915757495),
]


@on_every_evaluator
@pytest.mark.parametrize("node, gs_factor, limit, expected", ARX_LOSS_CASES)
def test_arx_loss_is_the_value_arx_expects(adult, kind, node, gs_factor, limit, expected):
    con, _, hierarchies = adult
    [result] = evaluate(con, hierarchies, ADULT_QIS, [KAnonymity(5)], limit, [ArxLoss(gs_factor)], [node], kind)
    assert result.values["arx-loss"] == pytest.approx(expected, rel=1e-12)


# ARX's metrics as TestUtilityMetrics configures them (call, arguments) and duckanon's name for each.
ARX_METRICS = {
    ("Metric.createDiscernabilityMetric", "[true]"): "dm-star", ("Metric.createDiscernabilityMetric", "[false]"): "dm",
    ("Metric.createAECSMetric", "[]"): "average-class-size",
    ("Metric.createEntropyMetric", "[false]"): "arx-nm-entropy", ("Metric.createEntropyMetric", "[]"): "arx-nm-entropy",
    ("Metric.createPrecisionMetric", "[false]"): "arx-precision",
    ("Metric.createPrecisionMetric", "[true]"): "arx-precision-monotone",
    ("Metric.createHeightMetric", "[]"): "arx-height",
    ("Metric.createLossMetric", '[{"const": "AggregateFunction.RANK"}]'): "arx-loss-rank",
}
SUBSET = Path(__file__).parents[1] / "benchmarks" / "arx_cases" / "adult_subset.csv.gz"


def _arx_metric_cases(k_only: bool):
    """TestUtilityMetrics's cases: k-anonymity alone, or every other combination of models."""
    params = []
    for case in ARX_VALUES["cases"]:
        metric = ARX_METRICS[case["metric"]["call"], json.dumps(case["metric"]["args"])]
        if ([m["new"] for m in case["models"]] == ["KAnonymity"]) == k_only:
            params.append(pytest.param(case, metric, id=f"TestUtilityMetrics-{case['index']}-{metric}"))
    return params


def arx_models(case, hierarchies):
    """The case's privacy models as duckanon's (ARX's research subset's population: all of Adult)."""
    made = []
    for spec in case["models"]:
        name, args = spec["new"], spec["args"]
        made.append({
            "KAnonymity": lambda: KAnonymity(args[0]),
            "DPresence": lambda: DeltaPresence(args[0], args[1], "adult"),
            "RecursiveCLDiversity": lambda: RecursiveCLDiversity(args[0], args[1], args[2]),
            "HierarchicalDistanceTCloseness": lambda: TCloseness(args[0], args[1], "hierarchical",
                                                                 hierarchies[args[0]]),
        }[name]())
    return made


@pytest.fixture(scope="module")
def research_subset(adult):
    """ARX's research subset (its data/adult_subset.csv) as Adult's records, matched as ARX's DataSubset.create
    matches them: each record of the subset takes the first Adult record of equal values not yet taken -- so of n
    equal records in the subset, the first n such in Adult."""
    con, _, _ = adult
    texts = ", ".join(f'CAST("{q}" AS VARCHAR)' for q in ADULT_QIS)
    keys = ", ".join(f'"{q}"' for q in ADULT_QIS)
    same = " AND ".join(f'CAST(a."{q}" AS VARCHAR) = s."{q}"' for q in ADULT_QIS)
    con.execute(f"""
        CREATE OR REPLACE TABLE adult_research_subset AS
        SELECT a.* EXCLUDE (position, nth) FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY {texts} ORDER BY position) AS nth
            FROM (SELECT *, rowid AS position FROM adult)) AS a
        JOIN (SELECT {keys}, COUNT(*) AS wanted FROM read_csv(?, delim=';', header=true, all_varchar=true)
              GROUP BY ALL) AS s ON {same}
        WHERE a.nth <= s.wanted""", [str(SUBSET)])
    assert con.execute("SELECT COUNT(*) FROM adult_research_subset").fetchone() == (3016,)
    return "adult_research_subset"


@on_every_evaluator
@pytest.mark.parametrize("case, metric", _arx_metric_cases(k_only=True))
def test_arx_single_metrics_are_the_values_arx_expects(adult, kind, case, metric):
    """Every node ARX's TestUtilityMetrics lists for k-anonymity alone (k = 5, at 0 % and 5 %), values within its
    own tolerance of 1e-8 (or 1e-12 relative: entropies of 10⁵ bits summed in another order; a rank-aggregated
    loss rank by rank)."""
    con, _, hierarchies = adult
    [k] = case["models"][0]["args"]
    nodes = [json.loads(node) for node in case["values"]]
    results = evaluate(con, hierarchies, ARX_EIGHT, [KAnonymity(k)], case["suppression_limit"], [metric], nodes,
                       kind)
    assert len(nodes) >= 8
    for node, result in zip(nodes, results):
        assert _numbers(result.values[metric]) == pytest.approx(json.loads(case["values"][json.dumps(node)]),
                                                                rel=1e-12, abs=1e-8), node


@pytest.mark.parametrize("case, metric", _arx_metric_cases(k_only=False))
def test_arx_metrics_under_arx_models_are_the_values_arx_expects(adult, research_subset, case, metric):
    """Every node ARX's TestUtilityMetrics lists for its other policies -- (recursive) l-diversity, hierarchical
    t-closeness, δ-presence over ARX's research subset with all of Adult its population, alone and together, at 0 %
    and 5 % -- under ARX's suppression semantics: the records each model suppresses there are ARX's."""
    con, _, hierarchies = adult
    models = arx_models(case, hierarchies)
    population = any(isinstance(m, DeltaPresence) for m in models)
    qis = [q for q in ADULT_QIS if q != case["sensitive"]]
    nodes = [json.loads(node) for node in case["values"]]
    results = evaluate(con, hierarchies, qis, models, case["suppression_limit"], [metric], nodes, "auto",
                       source=research_subset if population else "adult", suppression="replace-unchecked")
    for node, result in zip(nodes, results):
        assert _numbers(result.values[metric]) == pytest.approx(json.loads(case["values"][json.dumps(node)]),
                                                                rel=1e-12, abs=1e-8), node


# --------------------------------------------------------------------------- ARX's definitions, written out
def generalized(hierarchy, column, level):
    path = {row[0]: row for row in hierarchy.rows}
    return [path[str(v)][level] for v in column]


# A cost-benefit configuration where an attack pays on classes of fewer than 3 records (ARX's tests' getConfig4 has
# G/C = 50: on small random tables every class would be attacked).
PAYOUT = {"adversary_cost": 20.0, "adversary_gain": 50.0, "publisher_loss": 300.0, "publisher_benefit": 120.0}


def arx_reference(frame, hierarchies, levels, k, gs_factor, weights):
    """ARX's Loss under every aggregation, DM*, the monotone and non-monotone non-uniform entropies and the
    entropy-based information loss (``MetricSDNMEntropyBasedInformationLoss``), ambiguity (``MetricSDNMAmbiguity``)
    and AECS (``MetricSDAECS``) of generalizing ``frame`` to
    ``levels`` (a level per quasi-identifier), the records of classes smaller than k suppressed; and the Loss bound
    (suppression ignored).  From ARX's definitions, not duckanon's code."""
    qis = list(levels)
    records = len(frame)
    g = 1.0 if gs_factor <= 0.5 else 1.0 - 2.0 * (gs_factor - 0.5)
    s = 2.0 * gs_factor if gs_factor < 0.5 else 1.0
    columns = {q: generalized(hierarchies[q], frame[q], levels[q]) for q in qis}
    keys = list(zip(*columns.values()))
    sizes = Counter(keys)
    suppressed = np.array([sizes[key] < k for key in keys])
    losses, bounds, entropy, spread = [], [], 0.0, 0.0
    log_shares, most = np.zeros(records), 0.0  # EBIL: per record Σ log10 share; log10 of the domains' sizes' product
    covered, everything = np.ones(records), 1.0  # ambiguity: per record Π rows under its values; Π of all rows
    for q in qis:
        rows = hierarchies[q].rows
        under = Counter(row[levels[q]] for row in rows)  # ARX's domain share: rows under the value over all rows
        share = np.array([under[value] / len(rows) for value in columns[q]])
        log_shares += np.log10(share)
        most += math.log10(len(rows))
        covered *= share * len(rows)
        everything *= len(rows)
        cost = np.where(suppressed, 1.0 if s == 1 else share + s * (1 - share), g * share).sum()
        floor = g * records / len(rows)
        for total, out in ((cost, losses), (g * share.sum(), bounds)):
            out.append(math.floor(max((total - floor) / (records - floor), 0.0) * 1e10) / 1e10)
        originals, general = Counter(map(str, frame[q])), Counter(columns[q])
        entropy += sum(math.log2(general[gv] / originals[str(v)]) for v, gv in zip(frame[q], columns[q]))
        # The non-monotone variant: the suppressed records' generalized values, as if generalized once more.
        among = Counter(value for value, dropped in zip(columns[q], suppressed) if dropped)
        spread += sum(c * math.log2(suppressed.sum() / c) for c in among.values())
    w = np.array([weights[q] for q in qis], dtype=float)
    w = w / w.max() if w.max() > 0 else np.ones(len(qis))

    def aggregate(values):
        v, n = np.array(values) * w, len(qis)
        return {"geometric-mean": float(np.prod((v + 1) ** (1 / n)) - 1), "arithmetic-mean": float((v / n).sum()),
                "sum": float(v.sum()), "maximum": float(v.max()), "rank": sorted(v.tolist(), reverse=True)}

    ebil = float(np.where(suppressed, s, g * (1 + log_shares / most)).sum())
    # Publisher payout (MetricSDNMPublisherPayout, RiskModelCostBenefit), per record of a class of n: B (1 - IL) minus
    # L / n when G / n - C > 0, IL the class's entropy-based loss clamped to [0, 1]; the value: s B per suppressed
    # record, g (B - payout) per kept one.
    n = np.array([sizes[key] for key in keys], dtype=float)
    information_loss = np.clip(1 + log_shares / most, 0.0, 1.0)
    attacked = PAYOUT["adversary_gain"] / n - PAYOUT["adversary_cost"] > 0
    payout = PAYOUT["publisher_benefit"] * (1 - information_loss) - np.where(
        attacked, PAYOUT["publisher_loss"] / n, 0.0)
    payout_loss = float(np.where(suppressed, s * PAYOUT["publisher_benefit"],
                                 g * (PAYOUT["publisher_benefit"] - payout)).sum())
    ambiguity = float(np.where(suppressed, everything, covered).sum())
    groups = sum(size >= k for size in sizes.values()) * s + (g if suppressed.any() else 0.0)  # ARX switches g, s
    aecs = records / groups if groups else math.inf
    return (aggregate(losses), aggregate(bounds), float(sum(n * n for n in sizes.values())), entropy, entropy + spread,
            ebil, ambiguity, aecs, payout_loss)


@on_every_evaluator
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=tables(), k=st.integers(2, 6), gs_factor=st.sampled_from([0.0, 0.1, 0.33, 0.5, 0.66, 1.0]),
       raw_weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=4, max_size=4))
def test_arx_metrics_follow_arx_definitions_on_every_node(kind, data, k, gs_factor, raw_weights):
    """Every node of random tables: values as ARX defines them, and prior bounds below the value of every node
    above (the optimal search prunes by them, and generalizing can lower the loss by suppressing less)."""
    frame, hierarchies = data
    qis = list(hierarchies)
    weights = dict(zip(qis, raw_weights))
    metrics = [ArxLoss(gs_factor, aggregation, weights, name=f"arx-loss-{aggregation}") for aggregation in AGGREGATIONS]
    metrics += [DiscernibilityStar(), ArxNonUniformEntropy(), ArxNonMonotoneEntropy(),
                ArxEntropyBasedInformationLoss(gs_factor), ArxAmbiguity(), ArxAverageClassSize(gs_factor),
                ArxPublisherPayout(**PAYOUT, gs_factor=gs_factor)]
    con, anon = setup_table(frame)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(k)], suppression_limit=1.0,
                    others="insensitive")
    with bind(anon.workspace, "t", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, metrics, None, kind=kind) as evaluator:
        lattice = evaluator.lattice
        evaluator.evaluate_many(list(range(lattice.size)))
        priors = {m.name: evaluator.costs.prior_bounds(m, lattice.nodes) for m in metrics}
        results = [evaluator.results[i] for i in range(lattice.size)]
    for index, result in enumerate(results):
        levels = dict(zip(qis, result.node))
        loss, bound, squares, entropy, nm_entropy, ebil, ambiguity, aecs, payout = arx_reference(
            frame, hierarchies, levels, k, gs_factor, weights)
        for aggregation in AGGREGATIONS:
            name = f"arx-loss-{aggregation}"
            assert _numbers(result.values[name]) == pytest.approx(loss[aggregation], rel=1e-9, abs=1e-9), (levels, name)
            assert _numbers(result.bounds[name]) == pytest.approx(bound[aggregation], rel=1e-9, abs=1e-9), (levels, name)
        assert result.values["dm-star"] == squares
        assert result.values["arx-entropy"] == pytest.approx(entropy, rel=1e-9, abs=1e-9)
        assert result.values["arx-nm-entropy"] == pytest.approx(nm_entropy, rel=1e-9, abs=1e-9)
        assert result.values["arx-ebil"] == pytest.approx(ebil, rel=1e-9, abs=1e-9)
        above = [j for j, other in enumerate(results) if all(a >= b for a, b in zip(other.node, result.node))]
        assert result.values["arx-ambiguity"] == pytest.approx(ambiguity, rel=1e-9)
        assert result.values["arx-aecs"] == pytest.approx(aecs, rel=1e-12)
        assert result.values["arx-payout"] == pytest.approx(payout, rel=1e-9, abs=1e-6)
        for name in ("arx-ebil", "arx-ambiguity", "arx-aecs", "arx-payout"):
            assert result.bounds[name] <= min(results[j].values[name] for j in above) * (1 + 1e-9) + 1e-9
        for metric in metrics:
            if priors[metric.name] is not None:
                assert priors[metric.name][index] <= min(results[j].values[metric.name] for j in above) + 1e-12, metric.name
    con.close()


def arx_kl_divergence(frame, hierarchies, levels, k):
    """ARX's ``MetricSDNMKLDivergence`` written out as its loop runs: over every input record r, f · log2(f / q), f the
    share of records with r's original values, q the share of its class's records over the class's area (the rows
    its values cover, multiplied), or, suppressed, of all suppressed records over the product of the domains' rows."""
    qis = list(levels)
    records = len(frame)
    originals = list(zip(*(map(str, frame[q]) for q in qis)))
    columns = {q: generalized(hierarchies[q], frame[q], levels[q]) for q in qis}
    keys = list(zip(*columns.values()))
    tuples, classes = Counter(originals), Counter(keys)
    suppressed = [classes[key] < k for key in keys]
    outliers = sum(suppressed)
    area, everything = np.ones(records), 1.0
    for q in qis:
        rows = hierarchies[q].rows
        under = Counter(row[levels[q]] for row in rows)
        area *= np.array([under[value] for value in columns[q]], dtype=float)
        everything *= len(rows)
    total = 0.0
    for r in range(records):
        f = tuples[originals[r]] / records
        q = outliers / records / everything if suppressed[r] else classes[keys[r]] / records / area[r]
        total += f * math.log2(f / q)
    return total


@on_every_evaluator
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=tables(), k=st.integers(1, 6))
def test_kl_divergence_follows_arx_loop_on_every_node(kind, data, k):
    """ARX's KL divergence at every node of random tables against its loop over records, the classes below k
    suppressed; never below 0, the bound the optimal search prunes by; and the search's optimum is the least."""
    frame, hierarchies = data
    metric = ArxKLDivergence()
    con, anon = setup_table(frame)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(k)], suppression_limit=1.0,
                    suppression="replace-unchecked", others="insensitive")
    with bind(anon.workspace, "t", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, [metric], None, kind=kind) as evaluator:
        results = evaluator.evaluate_many(list(range(evaluator.lattice.size)))
    for result in results:
        expected = arx_kl_divergence(frame, hierarchies, dict(zip(hierarchies, result.node)), k)
        assert result.values["arx-kl"] == pytest.approx(expected, rel=1e-9, abs=1e-9), result.node
        assert result.values["arx-kl"] >= -1e-9 and result.bounds["arx-kl"] == 0.0
    found = anon.search("t", policy, metric=metric, evaluator=kind)
    assert found.best.values["arx-kl"] == pytest.approx(min(r.values["arx-kl"] for r in results), rel=1e-9, abs=1e-9)
    con.close()


@settings(max_examples=25, deadline=None)
@given(data=tables(), gs_factor=st.sampled_from([0.0, 0.5, 1.0]))
def test_entropy_based_losses_are_exactly_zero_at_the_bottom(data, gs_factor):
    """At the bottom with nothing suppressed, the entropy-based loss and the payout without attacks are 0, never a
    rounding below it: their sums cancel there, and the optimal search prunes by a prior bound of 0 (CI once found
    -6.8e-12)."""
    frame, hierarchies = data
    metrics = [ArxEntropyBasedInformationLoss(gs_factor),
               ArxPublisherPayout(**{**PAYOUT, "adversary_gain": 0.0}, gs_factor=gs_factor)]
    con, anon = setup_table(frame)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(1)], others="insensitive")
    with bind(anon.workspace, "t", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, metrics, None, kind="memory") as evaluator:
        evaluator.evaluate_many([0])
        values = evaluator.results[0].values
    con.close()
    assert values["arx-ebil"] >= 0.0 and values["arx-payout"] >= 0.0
    assert values["arx-ebil"] == pytest.approx(0.0, abs=1e-9)


@on_every_evaluator
def test_ambiguity_counts_hierarchy_rows_and_ebil_interval_widths_by_hand(kind):
    """An interval hierarchy over the ages 20, 21, 25 and 27 (cuts every 2 from 20 to 28) and sex at its bottom, at
    age's level 1.  Ambiguity counts the hierarchy rows a value covers, as ARX's ``DomainShareMaterialized``: [20, 22)
    covers 20 and 21, [24, 26) only 25, [26, 28) only 27, so the six records stand for 2 + 2 + 2 + 1 + 1 + 1 = 9
    combinations.  EBIL takes ARX's interval share, width over the domain's: 2/8 for every age, 1/2 for sex (sizes 8
    and 2), so each record costs 1 + log10(1/8) / log10(16) = 1/4, and the six 1.5."""
    frame = pd.DataFrame({"age": [20, 20, 21, 25, 27, 27], "sex": ["f", "m", "f", "m", "f", "f"]})
    hierarchies = {"age": Hierarchy.intervals([20, 21, 25, 27], widths=[2, 4]),
                   "sex": Hierarchy.from_lists([["f", "*"], ["m", "*"]], name="sex")}
    con, _ = setup_table(frame)
    [result] = evaluate(con, hierarchies, ["age", "sex"], [KAnonymity(1)], 0.0,
                        [ArxAmbiguity(), ArxEntropyBasedInformationLoss()], [(1, 0)], kind, source="t")
    con.close()
    assert result.values["arx-ambiguity"] == pytest.approx(9.0, rel=1e-12)
    assert result.values["arx-ebil"] == pytest.approx(1.5, rel=1e-12)


def test_an_infinite_aecs_is_published_as_text(tmp_path):
    """At gs-factor 0 a suppressed class costs nothing in ARX's AECS, and a node that suppresses nothing has
    records / 0 = ∞ (ARX's too): the release records it as "inf" in its JSON, and verifies."""
    frame = pd.DataFrame({"sex": ["f", "m", "f", "m"], "x": [1, 2, 3, 4]})
    con, anon = setup_table(frame)
    policy = Policy(quasi_identifiers={"sex": Hierarchy.from_lists([["f", "*"], ["m", "*"]], name="sex")},
                    models=[KAnonymity(2)], insensitive=["x"])
    anon.anonymize("t", policy, tmp_path / "r.duckdb", metric=ArxAverageClassSize(0.0))
    con.close()
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as release:
        assert json.loads(release.execute("SELECT metrics FROM release_info").fetchone()[0])["arx-aecs"] == "inf"
    assert duckanon.verify(tmp_path / "r.duckdb").holds


def _numbers(value):
    """A loss as the reference writes it: a number, or a rank-aggregated loss's ranks."""
    return list(value.ranks) if isinstance(value, RankedLoss) else value


def test_ranked_losses_order_lexicographically_from_the_largest():
    """ARX's ILMultiDimensionalRank: weighted losses sorted descending, compared rank by rank."""
    weights = np.ones(3)
    low_top = RankedLoss.of(np.array([0.5, 0.5, 0.5]), weights)
    high_top = RankedLoss.of(np.array([0.9, 0.0, 0.0]), weights)
    assert low_top < high_top and float(low_top) > float(high_top)  # the order is not the mean's
    assert RankedLoss.of(np.array([0.0, 0.9, 0.1]), weights) == RankedLoss.of(np.array([0.1, 0.0, 0.9]), weights)
    assert RankedLoss.of(np.array([0.9, 0.2, 0.0]), weights) > high_top
    assert -np.inf < low_top < np.inf
    assert RankedLoss.of(np.array([0.2, 1.0]), np.array([1.0, 0.5])).ranks == (0.5, 0.2)


@pytest.mark.parametrize("arguments, named", [
    ({"gs_factor": 1.5}, "gs_factor"), ({"gs_factor": float("nan")}, "gs_factor"),
    ({"aggregation": "rank-ish"}, "aggregation"), ({"weights": {"age": -1.0}}, "'age'"),
])
def test_arx_loss_rejects_bad_parameters_naming_them(arguments, named):
    with pytest.raises(duckanon.PolicyError, match=named):
        ArxLoss(**arguments)


def test_arx_metrics_are_selectable_by_name(adult):
    con, _, hierarchies = adult
    policy = Policy(quasi_identifiers={q: hierarchies[q] for q in ["sex", "age", "race"]}, models=[KAnonymity(5)],
                    suppression_limit=0.0, others="insensitive")
    anon = duckanon.connect(con)
    for name in ("arx-loss", "dm-star", "arx-entropy", "arx-nm-entropy", "arx-precision", "arx-precision-monotone",
                 "arx-height", "arx-ebil", "arx-ambiguity", "arx-aecs", "arx-kl"):
        result = anon.search("adult", policy, metric=name)
        assert result.proven and result.metric == name
