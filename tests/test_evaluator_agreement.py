"""The in-process node evaluator against the SQL one: the same result for every node, and the same searches.

:class:`~duckanon.search.sql_evaluator.SqlNodeEvaluator` is the reference (its verdicts and values are checked against
pandas in test_models.py, test_metrics.py and test_drop_mode_agreement.py).  The contract
(:class:`~duckanon.search.evaluator.NodeEvaluator`) asks :class:`~duckanon.search.memory_evaluator.MemoryNodeEvaluator`
for the same suppressed records, classes and verdicts at every node, and the same metric values and bounds up to
floating-point summation order.  Here both evaluate every node of random tables -- tree and interval hierarchies,
NULLs in quasi-identifiers and in sensitive values, text and integer sensitive values -- under random policies, limits
and both suppression modes; the in-process one also with its snapshots forced on (every node rolled up from an
evaluated specialization) and in several evaluation orders.  Then each evaluator's optimal search must find what
evaluating every node finds, and Samarati must take the same path on both.  On Adult (9 quasi-identifiers) the two
agree on a sample of nodes and on the optimum.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from search_data import ADULT_QIS, LABEL, adult_setup, setup_table, tree_hierarchy

from duckanon import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    AverageReidentificationRisk,
    DistinctLDiversity,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Loss,
    Policy,
    PolicyError,
    PopulationUniqueness,
    ProsecutorProfitability,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    SampleUniqueness,
    TCloseness,
)
from duckanon.encode.binding import bind
from duckanon.recode.generalization import FullDomainGeneralization
from duckanon.search import memory_evaluator
from duckanon.search import run as search_run
from duckanon.search.strategies import ExhaustiveSearch, OptimalSearch, SamaratiSearch

NAMED_METRICS = ["loss", "dm", "ncp", "non-uniform-entropy", "average-class-size", "entropy-loss", "mi-loss",
                 "arx-ebil", "arx-ambiguity"]
WEIGHTED = "weighted-loss"
TEXTS = ["flu", "cold", "hiv", "cancer", "asthma"]
# Integer sensitive values whose text order differs from their numeric order ("10" < "9"): an ordered distance or a
# value coding that followed the text would show.
NUMBERS = [9, 10, 2, 30, 100]
# The in-process evaluator's settings: as shipped (random tables are too small for snapshots), a snapshot of every
# evaluated node (so that nodes are rolled up from specializations), and that with a budget that keeps evicting them,
# no precomputed keys of the frequency table, and class keys grouped by hashing rather than by counting.
REGIMES = {
    "shipped": {},
    "every node a snapshot": {"SNAPSHOT_MIN_ROWS": 0, "SNAPSHOT_REDUCTION": 1},
    "snapshots evicted, keys hashed": {"SNAPSHOT_MIN_ROWS": 0, "SNAPSHOT_REDUCTION": 1, "SNAPSHOT_MIN_BYTES": 0,
                                       "SNAPSHOT_BYTES_SHARE": 0.5, "SNAPSHOT_LIMIT": 3, "DENSE_SPACE_PER_ROW": 0,
                                       "DENSE_SPACE_EXTRA": 0},
}
ORDERS = ["together", "by height", "shuffled"]
# DUCKANON_SEARCH_EXAMPLES=<n> runs n random examples (fresh ones each run) instead of the fixed ones the suite runs.
EXAMPLES = int(os.environ.get("DUCKANON_SEARCH_EXAMPLES", "0"))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# ----------------------------------------------------------------------------------------------- random tables
@st.composite
def quasi_identifier(draw, name):
    """(hierarchy, the values records take): integer intervals, or a tree without NULL, with a row for NULL, with
    NULL staying NULL on every level, or with NULL the level-1 label of a value, NULL following it.  (A value
    generalized to NULL while NULL stays NULL would split NULL's class above level 1: binding refuses it.)"""
    kind = draw(st.sampled_from(["tree", "null row", "null stays", "null label", "intervals"]))
    if kind == "intervals":
        low, span = draw(st.integers(0, 30)), draw(st.integers(6, 40))
        widths = draw(st.sampled_from([[5], [4], [3, 6], [5, 10], [2, 4, 8]]))
        return Hierarchy.intervals(range(low, low + span), widths=widths, name=name), list(range(low, low + span))
    tree = draw(tree_hierarchy(name))
    rows = [list(row) for row in tree.rows]
    if kind == "tree":
        return tree, tree.values
    if kind == "null row":
        rows.append([None, *rows[draw(st.integers(0, len(rows) - 1))][1:]])
    elif kind == "null label":
        rows[0][1] = None
        rows.append([None, *rows[0][1:]])
    return Hierarchy.from_lists(rows, name=name), [*tree.values, None]


@st.composite
def mixed_tables(draw):
    """(frame, hierarchies, whether a hierarchy may split a class): 20-200 records over 2-4 quasi-identifiers with skewed frequencies, a text sensitive column
    ``s`` (NULL among its values or not), an integer one ``v`` and a binary label."""
    hierarchies, values = {}, {}
    for i in range(draw(st.integers(2, 4))):
        hierarchies[f"q{i}"], values[f"q{i}"] = draw(quasi_identifier(f"q{i}"))
    records = draw(st.integers(20, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = {}
    for name, taken in values.items():
        picked = rng.choice(len(taken), size=records, p=rng.dirichlet(np.full(len(taken), 0.7)))
        picked[:2] = [0, 1]  # two values at least: an attribute's entropy weight is then not 0
        columns[name] = pd.Series([taken[j] for j in picked], dtype=object if None in taken else None)
    texts = TEXTS[:draw(st.integers(2, 5))] + ([None] if draw(st.booleans()) else [])
    numbers = NUMBERS[:draw(st.integers(2, 5))]
    for column, domain in (("s", texts), ("v", numbers)):
        picked = rng.choice(len(domain), size=records, p=rng.dirichlet(np.full(len(domain), 1.5)))
        picked[:len(domain)] = range(len(domain))  # every value occurs
        columns[column] = [domain[j] for j in picked]
    label = rng.integers(0, 2, size=records)
    label[:2] = [0, 1]
    columns[LABEL] = [f"c{v}" for v in label]
    return pd.DataFrame(columns), hierarchies


MODEL_KINDS = ["k", "distinct-l", "entropy-l", "recursive-cl", "alpha-k", "alpha-k highly sensitive", "p-sensitive",
               "t equal", "t ordered", "t hierarchical", "seed 003", "average risk", "sample uniqueness",
               "population uniqueness", "profitability"]
LIMITS = [(0.0, None), (0.04, None), (0.15, None), (0.5, None), (1.0, 0), (1.0, 3)]


def shares(column: pd.Series) -> pd.Series:
    return column.value_counts(normalize=True, dropna=False)


@st.composite
def mixed_policies(draw, frame, hierarchies, first=None):
    """A policy of 1-3 models (each over ``s`` or ``v``, where it applies; the first of kinds ``first`` when given),
    a suppression limit and a mode."""
    has_null = {c: bool(frame[c].isna().any()) for c in ("s", "v")}
    models = []
    kinds = draw(st.lists(st.sampled_from(MODEL_KINDS), min_size=0 if first else 1, max_size=2 if first else 3,
                          unique=True))
    if first:
        kinds = [draw(st.sampled_from(first)), *[k for k in kinds if k not in first]]
    for kind in kinds:
        # The ordered distance and seed 003's level table take no NULL.
        no_null = kind in ("t ordered", "seed 003")
        column = draw(st.sampled_from([c for c in ("s", "v") if not (no_null and has_null[c])]))
        values = frame[column]
        distinct = values.nunique(dropna=False)
        k = draw(st.integers(2, 6))
        fraction = draw(st.sampled_from([0.1, 0.4, 0.8]))
        if kind == "k":
            models.append(KAnonymity(k))
        elif kind == "average risk":
            models.append(AverageReidentificationRisk(draw(st.sampled_from([0.05, 0.1, 0.2, 0.4]))))
        elif kind == "sample uniqueness":
            models.append(SampleUniqueness(draw(st.sampled_from([0.0, 0.02, 0.1]))))
        elif kind == "population uniqueness":
            models.append(PopulationUniqueness(draw(st.sampled_from([0.001, 0.01])), len(frame) * 20,
                                               draw(st.sampled_from(["dankar", "pitman", "zayatz", "snb"]))))
        elif kind == "profitability":
            models.append(ProsecutorProfitability(
                adversary_gain=draw(st.sampled_from([0.0, 6.0, 50.0])), adversary_cost=draw(st.sampled_from([2.0, 3.0])),
                publisher_loss=draw(st.sampled_from([0.0, 300.0])), publisher_benefit=draw(st.sampled_from([0.0, 120.0]))))
        elif kind == "distinct-l":
            models.append(DistinctLDiversity(column, draw(st.integers(2, min(3, distinct)))))
        elif kind == "entropy-l":
            models.append(EntropyLDiversity(column, draw(st.sampled_from([1.2, 1.5, 2.0]))))
        elif kind == "recursive-cl":
            models.append(RecursiveCLDiversity(column, draw(st.sampled_from([0.5, 1.5, 2.0, 3.0])),
                                               draw(st.integers(2, min(3, distinct)))))
        elif kind.startswith("alpha-k"):
            highly = None
            bounded = shares(values)
            if kind.endswith("highly sensitive"):
                named = sorted(str(v) for v in values.dropna().unique())
                highly = draw(st.lists(st.sampled_from(named), min_size=1, max_size=len(named), unique=True))
                bounded = bounded[[v is not None and str(v) in highly for v in bounded.index]]
            top = float(bounded.max())
            models.append(AlphaKAnonymity(column, min(1.0, top + (1 - top) * fraction), k, highly_sensitive=highly))
        elif kind == "p-sensitive":
            models.append(PSensitiveKAnonymity(column, 2, k))
        elif kind.startswith("t "):
            distance, hierarchy = kind[2:], None
            if distance == "hierarchical":
                named = sorted(str(v) for v in values.dropna().unique())
                groups = draw(st.integers(1, 2))
                rows = [[v, f"g{j % groups}", "*"] for j, v in enumerate(named)]
                if has_null[column] and draw(st.booleans()):
                    rows.append([None, "g0", "*"])  # otherwise NULL is a leaf right under the root
                hierarchy = Hierarchy.from_lists(rows, name=f"{column} (t)")
            models.append(TCloseness(column, draw(st.sampled_from([0.1, 0.2, 0.35, 0.6])), distance=distance,
                                     hierarchy=hierarchy))
        else:
            levels = {v: draw(st.integers(1, 3)) for v in values.unique()}
            top = float(values.map(levels).value_counts(normalize=True).max())
            models.append(AlphaLDiversityKAnonymity(column, min(1.0, top + (1 - top) * fraction),
                                                    draw(st.integers(1, min(2, distinct))), k, levels))
    limit, maximum = draw(st.sampled_from(LIMITS))
    return Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s", "v"], insensitive=[LABEL],
                  suppression_limit=limit, max_suppressed=maximum,
                  suppression=draw(st.sampled_from(["replace", "drop"])))


@st.composite
def weighted_loss(draw, quasi):
    """Loss with given weights per quasi-identifier (0 among them)."""
    return Loss({q: draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.5])) for q in quasi}, name=WEIGHTED)


# ----------------------------------------------------------------------------------------------- comparing
@contextlib.contextmanager
def regime(name):
    """The in-process evaluator with the snapshot settings of ``REGIMES[name]``."""
    with pytest.MonkeyPatch.context() as patch:
        for setting, value in REGIMES[name].items():
            patch.setattr(memory_evaluator, setting, value)
        yield


def evaluate_in_order(ev, order, rng):
    """Evaluate every node: all in one call, a call per height from the bottom (later nodes from snapshots of lower
    ones), or in random batches."""
    lattice = ev.lattice
    if order == "together":
        ev.evaluate_many(range(lattice.size))
    elif order == "by height":
        for height in range(lattice.height + 1):
            ev.evaluate_many(int(i) for i in lattice.at_height(height))
    else:
        shuffled = rng.permutation(lattice.size)
        start = 0
        while start < lattice.size:
            step = int(rng.integers(1, 20))
            ev.evaluate_many(int(i) for i in shuffled[start:start + step])
            start += step


def differences(sql, memory, indices, policy):
    """Every field in which the two evaluators' results differ, one line each: node, field, both values."""
    found = []
    where = f"{policy.describe()}; {policy.suppression}, at most {sql.allowed_suppressed} suppressed"
    for index in indices:
        a, b = sql.evaluate(index), memory.evaluate(index)
        fields = [(f, getattr(a, f), getattr(b, f)) for f in ("node", "within_limit", "suppressed", "classes")]
        fields.append(("satisfies", sql.satisfies(index), memory.satisfies(index)))
        found += [f"{a.node} {f}: sql {x!r}, memory {y!r} ({where})" for f, x, y in fields if x != y]
        for kind in ("values", "bounds"):
            for name, x in getattr(a, kind).items():
                y = getattr(b, kind)[name]
                if not same(x, y):
                    found.append(f"{a.node} {kind}[{name}]: sql {x!r}, memory {y!r} ({where})")
    return found


def assert_no_differences(found):
    assert not found, f"{len(found)} differences:\n" + "\n".join(found[:20])


def best(ev, metric):
    """Over every node of ``ev``: the least value of ``metric`` among the satisfying nodes, and the nodes that reach
    it (up to summation order); None when no node satisfies."""
    values = {ev.lattice.node(i): ev.evaluate(i).values[metric] for i in range(ev.lattice.size)
              if ev.evaluate(i).within_limit and ev.satisfies(i)}
    if not values:
        return None, set()
    least = min(values.values())
    return least, {node for node, value in values.items() if same(value, least)}


# ----------------------------------------------------------------------------------------------- random tables
# No shrinking: every try costs SQL queries (minutes in all), and a failure already names each node, field and both
# values; the printed blob (@reproduce_failure) replays the example.
@settings(max_examples=EXAMPLES or 30, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not EXAMPLES, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_every_node_and_every_search_agree(data):
    agree_on_every_node_and_search(data)


RISK_THRESHOLDS = ["average risk", "sample uniqueness", "population uniqueness"]


@settings(max_examples=EXAMPLES or 12, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not EXAMPLES, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_risk_thresholds_agree_and_prune_exactly(data):
    """A risk threshold in every policy: both evaluators cut the same classes, and the optimal search, pruning by
    the thresholds' monotonicity flags, finds what evaluating every node finds."""
    agree_on_every_node_and_search(data, RISK_THRESHOLDS)


@settings(max_examples=EXAMPLES or 12, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not EXAMPLES, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_profitability_agrees_and_prunes_exactly(data):
    """A model that prices classes in every policy: both evaluators price them alike to the bit (intervals, NULL rows
    and labels included), and the optimal search, which may prune by bounds alone, finds what evaluating every node
    finds."""
    agree_on_every_node_and_search(data, ["profitability"])


def agree_on_every_node_and_search(data, first=None):
    frame, hierarchies = data.draw(mixed_tables())
    policy = data.draw(mixed_policies(frame, hierarchies, first))
    metrics = [*NAMED_METRICS, data.draw(weighted_loss(list(hierarchies)))]
    settings_name = data.draw(st.sampled_from(list(REGIMES)))
    order = data.draw(st.sampled_from(ORDERS))
    # In process over every level's codes, or, asked to fit a budget they exceed, over the original values' alone.
    lean = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    con, anon = setup_table(frame)
    workspace = anon.workspace
    with contextlib.ExitStack() as stack, regime(settings_name):
        try:
            bound = stack.enter_context(bind(workspace, "t", policy))
            sql = stack.enter_context(search_run.evaluator(workspace, bound, metrics, LABEL, "sql"))
            memory = stack.enter_context(search_run.evaluator(workspace, bound, metrics, LABEL, "memory",
                                                              memory_budget=1 if lean else None))
        except PolicyError:
            assume(False)  # parameters no release of this table can meet (e.g. l above the distinct values)
        lifted = memory_evaluator.LevelLifts.of(memory.encoding, memory.hierarchies).from_leaves
        assert memory.base.all_levels == (not lean or not lifted)
        size = sql.lattice.size
        sql.evaluate_many(range(size))
        evaluate_in_order(memory, order, rng)
        assert_no_differences(differences(sql, memory, range(size), policy))
        assert (sql.monotone, sql.suppressed_monotone) == (memory.monotone, memory.suppressed_monotone)
        sql_prior, memory_prior = sql.prior_bounds(), memory.prior_bounds()
        assert all(same(x, y) for x, y in zip(sql_prior, memory_prior)), (sql_prior, memory_prior)

        # Searches on fresh evaluators, objective drawn: exhaustive and optimal find what evaluating every node
        # finds, and Samarati takes the same path on both evaluators.
        objective = data.draw(st.sampled_from(metrics))
        found = {}
        for kind, everything in (("sql", sql), ("memory", memory)):
            expected, tied = best(everything, objective if isinstance(objective, str) else objective.name)
            strategies = [OptimalSearch(), SamaratiSearch()] + (
                [ExhaustiveSearch()] if kind == "memory" else [])
            for strategy in strategies:
                with search_run.evaluator(workspace, bound, [objective], LABEL, kind) as ev:
                    found[kind, strategy.name] = result = strategy.search(ev)
                if strategy.name == "samarati":
                    continue
                what = (kind, strategy.name, policy.describe(), result.summary())
                assert result.found == (expected is not None), what
                if expected is not None:
                    assert same(result.best.values[result.metric], expected), (*what, expected)
                    assert result.best.node in tied, (*what, tied)
        sql_samarati, memory_samarati = found["sql", "samarati"], found["memory", "samarati"]
        assert sql_samarati.found == memory_samarati.found
        if sql_samarati.found:
            assert sum(sql_samarati.best.node) == sum(memory_samarati.best.node)
            assert same(sql_samarati.best.values[sql_samarati.metric],
                        memory_samarati.best.values[memory_samarati.metric])
    con.close()


# ----------------------------------------------------------------------------------------------- Adult
@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(ADULT_QIS)
    yield anon, Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], suppression_limit=0.05,
                       others="insensitive")
    con.close()


SAMPLED_METRICS = ["dm", "loss", "arx-ambiguity"]  # ambiguity: a power per record, summed in both evaluators' snapshots


def test_adult_sampled_nodes_agree(adult):
    """Adult, 9 quasi-identifiers (12,960 nodes), k = 5 at 5 %: a few hundred nodes, lowest first in batches so that
    the in-process evaluator rolls later ones up from its snapshots."""
    anon, policy = adult
    workspace = anon.workspace
    with (bind(workspace, "adult", policy) as bound,
          search_run.evaluator(workspace, bound, SAMPLED_METRICS, None, "sql") as sql,
          search_run.evaluator(workspace, bound, SAMPLED_METRICS, None, "memory") as memory):
        lattice = sql.lattice
        sample = np.random.default_rng(14).choice(lattice.size, size=300, replace=False)
        sample = sorted(sample.tolist(), key=lambda i: (sum(lattice.node(i)), i))
        sql.evaluate_many(sample)
        for start in range(0, len(sample), 64):
            memory.evaluate_many(sample[start:start + 64])
        assert_no_differences(differences(sql, memory, sample, policy))
        assert {sql.evaluate(i).within_limit for i in sample} == {True, False}


def test_a_lone_node_s_metrics_are_the_sql_evaluator_s_from_one_evaluator_that_keeps_no_snapshots(adult):
    """The metrics a release records of its node (every metric, the entropy ones sharing their rows' sums) come from
    one in-process evaluator without snapshots, where a search's evaluator needs room for them: the values the SQL
    evaluator gives that node."""
    anon, policy = adult
    node = {"sex": 0, "age": 2, "race": 1, "marital-status": 1, "education": 2, "native-country": 1,
            "workclass": 1, "occupation": 1, "salary-class": 0}
    built = []
    original = search_run.evaluator

    @contextlib.contextmanager
    def watched(*args, **kwargs):
        with original(*args, **kwargs) as evaluator:
            built.append(evaluator)
            yield evaluator

    names = search_run.metric_names()
    lone = [name for name in names if name not in search_run.WEIGHTED]
    with anon.encode("adult", policy) as encoded:
        search_run.evaluator = watched
        try:
            values = search_run.node_metrics(anon.workspace, encoded, FullDomainGeneralization(node))
        finally:
            search_run.evaluator = original
        assert len(built) == 1 and isinstance(built[0], memory_evaluator.MemoryNodeEvaluator)
        assert not built[0].keeps_snapshots
        with search_run.evaluator(anon.workspace, encoded.bound, lone, None, "sql",
                                  encoding=encoded.encoding) as sql:
            expected = sql.evaluate(sql.lattice.index(sql.lattice.node_of(encoded.bound.levels(node)))).values
    assert set(values) == set(lone)
    for name in lone:
        assert same(float(values[name]), float(expected[name])), (name, values[name], expected[name])


@pytest.mark.parametrize("metric", ["dm", "loss"])
def test_adult_optimum_agrees(adult, metric):
    anon, policy = adult
    sql = anon.search("adult", policy, metric=metric, evaluator="sql")
    memory = anon.search("adult", policy, metric=metric, evaluator="memory")
    assert sql.found and memory.found
    assert memory.best.node == sql.best.node, (sql.summary(), memory.summary())
    assert same(memory.best.values[metric], sql.best.values[metric])
    assert memory.best.suppressed == sql.best.suppressed


@pytest.mark.parametrize("cards", [[3, 5, 4], [2**21, 2**21, 2**21]])  # keys packed; keys made dense on the way
def test_population_records_per_class_match_a_pandas_join(cards):
    """Each class of the data finds its records in the population's classes, whether the classes' keys are packed
    alike on both sides or were made dense (a key space past 2**62) and differ."""
    rng = np.random.default_rng(7)
    population = pd.DataFrame({f"a{i}": rng.integers(0, min(card, 6), 400) * (card // min(card, 6))
                               for i, card in enumerate(cards)})
    population["n"] = rng.integers(1, 4, len(population))
    data = population.sample(150, random_state=1)
    columns = [f"a{i}" for i in range(len(cards))]
    grouped = [memory_evaluator._group([frame[c].to_numpy(np.int64) for c in columns], cards,
                                       frame["n"].to_numpy(np.float64)) for frame in (population, data)]
    assert (grouped[0].radices is None) == (cards[0] > 10)
    found, population_only = memory_evaluator._population_counted(grouped[0], grouped[1], cards)
    expected = population.groupby(columns)["n"].sum()
    keys = list(zip(*grouped[1].codes))
    assert found.tolist() == [expected[tuple(int(v) for v in key)] for key in keys]
    assert population_only == len(expected) - len(data.groupby(columns))


@pytest.mark.parametrize("cards", [[3, 5, 4], [2**60, 8, 8], [2**21, 2**21, 2**21]],
                         ids=["packed", "made dense, then counted", "made dense, then hashed"])
def test_every_group_knows_the_values_of_its_rows(cards):
    """A group's codes are its rows' values, however its keys were grouped: packed and unpacked, or made dense on the
    way (a key space past 2**62, as a wide table's) and grouped by counting or by hashing, the rows in any order."""
    rng = np.random.default_rng(5)
    columns = [rng.integers(0, 6, 500) * (card // 6) for card in cards]
    groups = memory_evaluator._group(columns, cards, np.ones(500))
    assert (groups.radices is None) == (cards[0] > 10)
    for column, codes in zip(columns, groups.codes):
        assert len(codes) == groups.count and (codes[groups.ids] == column).all()


@settings(max_examples=EXAMPLES or 200, deadline=None)
@given(key=st.lists(st.integers(-2**62, 2**62), max_size=60).map(lambda values: np.array(values, dtype=np.int64)),
       repeats=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_grouping_by_sorting_numbers_groups_as_pandas_hashing_does(key, repeats, seed):
    """A process that never loads pandas (the CLI's main job) groups keys by sorting them: the same group ids and
    keys as ``pandas.factorize``, numbered in order of first appearance, whatever the keys and their repeats."""
    shuffled = np.random.default_rng(seed).permutation(np.tile(key, repeats))
    ids, keys = memory_evaluator.sorted_factorize(shuffled)
    expected_ids, expected_keys = pd.factorize(shuffled)
    assert ids.tolist() == expected_ids.tolist() and keys.tolist() == expected_keys.tolist()
    assert keys.dtype == shuffled.dtype
