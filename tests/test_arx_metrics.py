"""ARX's metrics (``arx-loss``, ``dm-star``, ``arx-entropy``, ``arx-nm-entropy``; ARX's AECS and non-monotone DM being duckanon's
``average-class-size`` and ``dm``) against the values ARX's own tests expect, and against a pandas computation of
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
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import Hierarchy, KAnonymity, Policy
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.search import run as search_run
from duckanon.utility.metrics import (
    AGGREGATIONS,
    ArxLoss,
    ArxNonMonotoneEntropy,
    ArxNonUniformEntropy,
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


def evaluate(con, hierarchies, qis, models, limit, metrics, nodes, kind):
    """``metrics``' values and bounds at ``nodes`` (levels in ``qis`` order) from one evaluator of ``kind``."""
    policy = Policy(quasi_identifiers={q: hierarchies[q] for q in qis}, models=models, suppression_limit=limit,
                    others="insensitive")
    workspace = duckanon.connect(con).workspace
    with bind(workspace, "adult", policy) as bound, \
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


def _arx_metric_cases(call, args, metric):
    return [pytest.param(case, metric, id=f"TestUtilityMetrics-{case['index']}") for case in ARX_VALUES["cases"]
            if case["metric"] == {"call": call, "args": args} and [m["new"] for m in case["models"]] == ["KAnonymity"]]


@on_every_evaluator
@pytest.mark.parametrize("case, metric", [
    *_arx_metric_cases("Metric.createDiscernabilityMetric", [True], "dm-star"),
    *_arx_metric_cases("Metric.createDiscernabilityMetric", [False], "dm"),
    *_arx_metric_cases("Metric.createAECSMetric", [], "average-class-size"),
    *_arx_metric_cases("Metric.createEntropyMetric", [False], "arx-nm-entropy"),
    *_arx_metric_cases("Metric.createEntropyMetric", [], "arx-nm-entropy"),
    *_arx_metric_cases("Metric.createPrecisionMetric", [False], "arx-precision"),
    *_arx_metric_cases("Metric.createPrecisionMetric", [True], "arx-precision-monotone"),
    *_arx_metric_cases("Metric.createHeightMetric", [], "arx-height"),
])
def test_arx_single_metrics_are_the_values_arx_expects(adult, kind, case, metric):
    """Every node ARX's TestUtilityMetrics lists for k-anonymity alone (k = 5, at 0 % and 5 %), values within its
    own tolerance of 1e-8 (or 1e-12 relative: entropies of 10⁵ bits summed in another order)."""
    con, _, hierarchies = adult
    [k] = case["models"][0]["args"]
    nodes = [json.loads(node) for node in case["values"]]
    results = evaluate(con, hierarchies, ARX_EIGHT, [KAnonymity(k)], case["suppression_limit"], [metric], nodes,
                       kind)
    assert len(nodes) >= 8
    for node, result in zip(nodes, results):
        assert result.values[metric] == pytest.approx(float(case["values"][json.dumps(node)]), rel=1e-12, abs=1e-8), node


# --------------------------------------------------------------------------- ARX's definitions, written out
def generalized(hierarchy, column, level):
    path = {row[0]: row for row in hierarchy.rows}
    return [path[str(v)][level] for v in column]


def arx_reference(frame, hierarchies, levels, k, gs_factor, weights):
    """ARX's Loss under every aggregation, DM*, and the monotone and non-monotone non-uniform entropies of
    generalizing ``frame`` to ``levels`` (a level per quasi-identifier), the records of classes smaller than k
    suppressed; and the Loss bound (suppression ignored).  From ARX's definitions, not duckanon's code."""
    qis = list(levels)
    records = len(frame)
    g = 1.0 if gs_factor <= 0.5 else 1.0 - 2.0 * (gs_factor - 0.5)
    s = 2.0 * gs_factor if gs_factor < 0.5 else 1.0
    columns = {q: generalized(hierarchies[q], frame[q], levels[q]) for q in qis}
    keys = list(zip(*columns.values()))
    sizes = Counter(keys)
    suppressed = np.array([sizes[key] < k for key in keys])
    losses, bounds, entropy, spread = [], [], 0.0, 0.0
    for q in qis:
        rows = hierarchies[q].rows
        under = Counter(row[levels[q]] for row in rows)  # ARX's domain share: rows under the value over all rows
        share = np.array([under[value] / len(rows) for value in columns[q]])
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

    return aggregate(losses), aggregate(bounds), float(sum(n * n for n in sizes.values())), entropy, entropy + spread


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
    metrics += [DiscernibilityStar(), ArxNonUniformEntropy(), ArxNonMonotoneEntropy()]
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
        loss, bound, squares, entropy, nm_entropy = arx_reference(frame, hierarchies, levels, k, gs_factor, weights)
        for aggregation in AGGREGATIONS:
            name = f"arx-loss-{aggregation}"
            assert _numbers(result.values[name]) == pytest.approx(loss[aggregation], rel=1e-9, abs=1e-9), (levels, name)
            assert _numbers(result.bounds[name]) == pytest.approx(bound[aggregation], rel=1e-9, abs=1e-9), (levels, name)
        assert result.values["dm-star"] == squares
        assert result.values["arx-entropy"] == pytest.approx(entropy, rel=1e-9, abs=1e-9)
        assert result.values["arx-nm-entropy"] == pytest.approx(nm_entropy, rel=1e-9, abs=1e-9)
        above = [j for j, other in enumerate(results) if all(a >= b for a, b in zip(other.node, result.node))]
        for metric in metrics:
            if priors[metric.name] is not None:
                assert priors[metric.name][index] <= min(results[j].values[metric.name] for j in above) + 1e-12
    con.close()


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


@on_every_evaluator
@pytest.mark.parametrize("case", [case for case, _ in (p.values for p in _arx_metric_cases(
    "Metric.createLossMetric", [{"const": "AggregateFunction.RANK"}], "arx-loss-rank"))])
def test_arx_rank_loss_is_the_vector_arx_expects(adult, kind, case):
    """ARX's TestUtilityMetrics rank-aggregated Loss at every node it lists, rank by rank."""
    con, _, hierarchies = adult
    [k] = case["models"][0]["args"]
    nodes = [json.loads(node) for node in case["values"]]
    results = evaluate(con, hierarchies, ARX_EIGHT, [KAnonymity(k)], case["suppression_limit"], ["arx-loss-rank"],
                       nodes, kind)
    for node, result in zip(nodes, results):
        expected = json.loads(case["values"][json.dumps(node)])
        assert list(result.values["arx-loss-rank"].ranks) == pytest.approx(expected, abs=1e-10), node


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
                 "arx-height"):
        result = anon.search("adult", policy, metric=name)
        assert result.proven and result.metric == name
