"""The heuristic searches (ARX's Lightning, its top-down variant, its genetic algorithm) and the wide lattice.

Held to a brute-force evaluation of every node on random tables: a heuristic's node satisfies the policy and is the
best satisfying node among those it evaluated; Lightning and top-down, run to their end, reach the optimum.  On a
30-attribute table (a lattice of 10^18 nodes, never listed) each returns a node whose release a plain pandas group-by
finds k-anonymous within the suppression limit; the exact strategies refuse that lattice by name.  A heuristic given
no limit, or a genetic parameter out of range, is refused before any work.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_data import LABEL, on_every_evaluator, setup_table, tables
from test_search import EXAMPLES, brute_or_reject, close, evaluator, policies

import duckanon
from duckanon import KAnonymity, Policy, PolicyError
from duckanon.cli import main
from duckanon.datasets.wide import generate_wide, wide_hierarchies
from duckanon.search.heuristics import GeneticSearch
from duckanon.search.lattice import LISTED_NODES, Lattice, WideLattice, lattice_of
from duckanon.search.strategies import STRATEGIES, SearchBudget

HEURISTICS = {name: strategy for name, strategy in STRATEGIES.items() if not strategy.lists_lattice}


def heuristic(name: str):
    return HEURISTICS[name](seed=7) if name == "genetic" else HEURISTICS[name]()


# ----------------------------------------------------------------------------------------------- the lattices
def test_wide_lattice_numbers_nodes_as_the_listed_one():
    """Index, levels and neighbours agree with the listed lattice's; past 64 bits the numbering still round-trips."""
    listed, wide = Lattice(["a", "b", "c"], [5, 2, 3]), WideLattice(["a", "b", "c"], [5, 2, 3])
    assert (wide.size, wide.height, wide.top, wide.bottom) == (listed.size, listed.height, listed.top, listed.bottom)
    for index in range(listed.size):
        node = listed.node(index)
        assert wide.node(index) == node and wide.index(node) == index
        assert list(wide.successors(index)) == list(listed.successors(index))
        assert list(wide.predecessors(index)) == list(listed.predecessors(index))
    forty = lattice_of([f"q{i}" for i in range(40)], [5] * 40)
    assert not forty.listed and forty.size == 5 ** 40 > 2 ** 64
    node = tuple(i % 5 for i in range(40))
    assert forty.node(forty.index(node)) == node
    assert next(forty.node(s) for s in forty.successors(forty.index(node)))[0] == node[0] + 1
    assert lattice_of(["a"], [LISTED_NODES]).listed and not lattice_of(["a", "b"], [LISTED_NODES, 2]).listed


# ----------------------------------------------------------------------------------------------- random tables
@settings(max_examples=EXAMPLES or 5, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not EXAMPLES)
@on_every_evaluator
@given(data=st.data())
def test_heuristics_on_random_tables(kind, data):
    """Any check limit: the node found satisfies and is the best satisfying one evaluated; Lightning and top-down
    without a binding limit are proven and reach the optimum's value; the genetic search repeats itself by seed."""
    frame, hierarchies = data.draw(tables())
    policy = data.draw(policies(frame, hierarchies))
    con, anon = setup_table(frame)
    results, _, lattice = brute_or_reject(anon, policy, kind)
    metric = data.draw(st.sampled_from(["loss", "dm", "ncp"]))
    satisfying = [r.values[metric] for r in results.values() if r.satisfied]
    for name in HEURISTICS:
        limit = data.draw(st.integers(1, lattice.size + 2), label=f"{name} check limit")
        with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
            found = heuristic(name).search(ev, SearchBudget(check_limit=limit))
            evaluated = [i for i in ev.results if ev.results[i].within_limit and ev.satisfies(i)]
        assert found.checks <= limit, name
        assert found.found == bool(evaluated), (name, found.summary())
        if found.found:
            assert results[found.best.node].satisfied, (name, found.summary())
            best = min(evaluated, key=lambda i: (results[lattice.node(i)].values[metric], i))
            assert close(found.best.values[metric], results[lattice.node(best)].values[metric]), name
        if name != "genetic":
            with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
                whole = heuristic(name).search(ev, SearchBudget(check_limit=lattice.size + 1))
            assert whole.proven and whole.found == bool(satisfying), (name, whole.summary())
            if satisfying:
                assert close(whole.best.values[metric], min(satisfying)), (name, whole.summary())
    with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
        first = GeneticSearch(subpopulation_size=6, iterations=4, seed=3).search(ev, SearchBudget(check_limit=10**6))
    with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
        again = GeneticSearch(subpopulation_size=6, iterations=4, seed=3).search(ev, SearchBudget(check_limit=10**6))
    assert first.checks == again.checks and first.found == again.found
    assert not first.found or first.best.node == again.best.node
    con.close()


# ----------------------------------------------------------------------------------------------- 30 attributes
ROWS, ATTRIBUTES, K, LIMIT = 3_000, 30, 5, 0.05


@pytest.fixture(scope="module")
def wide():
    con = duckdb.connect()
    hierarchies = generate_wide(con, "wide", ROWS, ATTRIBUTES, seed=11)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(K)], suppression_limit=LIMIT)
    yield con, duckanon.connect(con), policy
    con.close()


# Checks each heuristic gets on the 30 attributes.  Lightning's first greedy climb starts after `height` (95)
# best-first expansions of about 30 nodes each, and the climb takes as many: its first release needs ~5,700 checks,
# which only the in-process evaluator makes in a test's time (the SQL one is held to brute force on random tables).
WIDE_CHECKS = {"lightning": 6_500, "top-down": 150, "genetic": 250}
WIDE_CASES = [(kind, name) for kind in ("memory", "sql") for name in HEURISTICS
              if not (kind == "sql" and name == "lightning")]


@pytest.mark.parametrize("kind, name", WIDE_CASES)
def test_heuristics_release_a_wide_table(wide, tmp_path, kind, name):
    """Stopped by its check limit on a lattice of 10^18 nodes, each heuristic publishes a node whose release pandas
    finds k-anonymous (suppressed records starred) with at most 5 % of the records suppressed, every record kept."""
    _con, anon, policy = wide
    result, release = anon.anonymize("wide", policy, tmp_path / "wide.duckdb", metric="arx-loss", strategy=name,
                                     evaluator=kind, check_limit=WIDE_CHECKS[name])
    assert not result.proven and result.lattice_size == 5 ** 10 * (3 * 3 * 4 ** 4) ** 3 * 3 * 3  # 1.07e18
    assert result.checks <= WIDE_CHECKS[name]
    released = duckdb.connect(str(release.path), read_only=True).execute("SELECT * FROM release").df()
    assert len(released) == ROWS
    columns = list(policy.quasi_identifiers)
    starred = (released[columns] == "*").all(axis=1)
    assert starred.sum() <= LIMIT * ROWS and starred.sum() == result.best.suppressed
    sizes = released[~starred].groupby(columns).size()
    assert sizes.min() >= K


def test_exact_searches_refuse_a_wide_lattice(wide):
    _con, anon, policy = wide
    for strategy in ("optimal", "samarati", "exhaustive"):
        with pytest.raises(PolicyError, match=f"the {strategy} search lists the lattice's nodes.*lightning, top-down, "
                                              "genetic"):
            anon.search("wide", policy, strategy=strategy)
    with pytest.raises(PolicyError, match="solution space lists every node"):
        anon.solution_space("wide", policy, metrics=["loss"])


# ----------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", list(HEURISTICS))
def test_a_heuristic_needs_a_limit_before_any_work(name, capsys):
    """Refused before the source is read: the table does not even exist."""
    anon = duckanon.connect(duckdb.connect())
    policy = Policy(quasi_identifiers=wide_hierarchies(3), models=[KAnonymity(2)])
    with pytest.raises(PolicyError, match=f"the {name} search needs a time_limit .* or a check_limit"):
        anon.search("no_such_table", policy, strategy=name)
    assert main(["no_such.csv", "--qi", "a", "-k", "2", "--strategy", name]) != 0
    assert f"the {name} search needs a time_limit" in capsys.readouterr().err


@pytest.mark.parametrize("keyword, value", [("subpopulation_size", 0), ("iterations", -1), ("elite_fraction", 1.5),
                                            ("production_fraction", 0.0), ("mutation_probability", float("nan")),
                                            ("immigration_interval", 0)])
def test_genetic_parameters_are_named(keyword, value):
    with pytest.raises(PolicyError, match=keyword):
        GeneticSearch(**{keyword: value})


def test_wide_table_is_seeded_and_correlated():
    """The same seed gives the same table; an attribute's values depend on the others (the latent groups)."""
    tables_ = []
    for _ in range(2):
        con = duckdb.connect()
        generate_wide(con, "w", 2_000, 6, seed=5)
        tables_.append(con.execute("SELECT * FROM w").df())
    assert tables_[0].equals(tables_[1])
    frame = tables_[0]
    # q02 given q03: far from independent (a chi-square statistic well above its degrees of freedom).
    observed = frame.groupby(["q02", "q03"]).size().unstack(fill_value=0).to_numpy(dtype=float)
    expected = observed.sum(1, keepdims=True) * observed.sum(0, keepdims=True) / observed.sum()
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert chi2 > 10 * (observed.shape[0] - 1) * (observed.shape[1] - 1)
    assert np.isin(frame["q01"], range(100)).all()
