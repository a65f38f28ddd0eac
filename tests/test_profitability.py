"""ARX's game-theoretic models, without and with an attack, and the publisher-payout metric.

The derived k is checked against ARX's formula by hand (``ProfitabilityProsecutorNoAttack.initialize``); the models
against pandas group-bys (k-anonymity over the data, k-map over a population table); the payout metric by hand on a
small table, and on every node of random tables in ``test_arx_metrics.py`` against ARX's definition.  ARX's own test
cases run in ``benchmarks/bench_arx_cases.py``.

The models with an attack are held to a pandas recomputation of ARX's definition (``ProfitabilityProsecutor``,
``RiskModelCostBenefit.getExpectedPublisherPayout``, ``MetricSDNMEntropyBasedInformationLoss``): each class's domain
shares counted from the hierarchy's rows, its information loss, the adversary's success and the publisher's payout.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_population_models import HIERARCHIES, connection, generalized, people, policy, sampled

import duckanon
from duckanon import (
    ArxPublisherPayout,
    Hierarchy,
    JournalistNoAttackProfitability,
    JournalistProfitability,
    KAnonymity,
    Policy,
    PolicyError,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
)
from duckanon.cli import main
from duckanon.encode.binding import bind
from duckanon.privacy.profitability import no_attack_k
from duckanon.privacy.registry import model_from_params
from duckanon.search import run as search_run
from duckanon.utility.metrics import Discernibility


@pytest.mark.parametrize("gain, cost, k", [
    (1200, 2, 601),  # G/C = 600, whole: an attack on 600 records breaks even, so 601
    (120, 20, 7), (1000, 20, 51), (7, 2, 4), (0, 5, 1), (0, 0, 1), (1, 3, 1),
])
def test_no_attack_k_as_arx(gain, cost, k):
    assert no_attack_k(gain, cost, "m") == k
    assert ProsecutorNoAttackProfitability(gain, cost).k == k


def test_an_attack_that_always_pays_is_refused_by_name():
    with pytest.raises(PolicyError, match="adversary_cost=0 with adversary_gain=5"):
        ProsecutorNoAttackProfitability(5, 0)
    with pytest.raises(PolicyError, match="adversary_gain"):
        JournalistNoAttackProfitability(-1, 2, "population")


def test_models_rebuild_from_their_parameters():
    for model in (ProsecutorNoAttackProfitability(120, 20), JournalistNoAttackProfitability(120, 20, "voters")):
        assert model_from_params(model.name, model.params()) == model
        assert model_from_params(model.name, model.params()).k == 7


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_attack_models_suppress_what_pandas_counts(seed):
    """The prosecutor's model fails the classes of at most G/C records, the journalist's the classes that stand for
    at most G/C population records."""
    rng = np.random.default_rng(seed)
    population = people(rng, 600)
    sample = population.sample(150, random_state=seed)
    anon = connection(population[["zip", "age", "sex"]], sample)
    for levels in ({"zip": 1, "age": 1, "sex": 0}, {"zip": 2, "age": 2, "sex": 1}, {"zip": 3, "age": 1, "sex": 1}):
        s = generalized(sample, levels).groupby(list(HIERARCHIES)).size()
        p = generalized(population, levels).groupby(list(HIERARCHIES)).size().reindex(s.index)
        prosecutor = anon.check("people", policy([ProsecutorNoAttackProfitability(14, 3)], suppression_limit=1.0),
                                levels)
        assert prosecutor.violating_records == int(s[s < 5].sum())  # 14/3 = 4.67: classes of 5 or more
        journalist = anon.check("people", policy([JournalistNoAttackProfitability(60, 4, "population")],
                                                 suppression_limit=1.0), levels)
        assert journalist.violating_records == int(s[p < 16].sum())  # 60/4 = 15, whole: 16 people or more


def six_over_sex() -> tuple[duckanon.Anonymizer, Hierarchy]:
    """Table ``t``: six records over sex, 'f' ×4 and 'm' ×2, and an insensitive ``x``; and sex's hierarchy."""
    frame = pd.DataFrame({"sex": ["f", "f", "f", "f", "m", "m"], "x": range(6)})
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    return duckanon.connect(con), Hierarchy.from_lists([["f", "*"], ["m", "*"]], name="sex")


def test_payout_by_hand():
    """Six records over sex ('f' ×4, 'm' ×2) at the bottom: the hierarchy has two values, so IL = 1 + log10(1/2) /
    log10(2) = 0 and every record pays B.  With G = 6, C = 2 an attack pays on classes below 3: the class of 'm'.
    Value: g × (B × 0 + L × 1 class) = 300.  At the top, '*' (share 1, IL 1), one class of 6: no attack pays,
    value 6 × B = 720."""
    anon, sex = six_over_sex()
    metric = ArxPublisherPayout(adversary_cost=2, adversary_gain=6, publisher_loss=300, publisher_benefit=120)
    pol = Policy(quasi_identifiers={"sex": sex}, models=[KAnonymity(1)], insensitive=["x"])
    with bind(anon.workspace, "t", pol) as bound:
        for kind in ("sql", "memory"):
            with search_run.evaluator(anon.workspace, bound, [metric], None, kind) as ev:
                bottom, top = ev.evaluate(ev.lattice.index((0,))), ev.evaluate(ev.lattice.index((1,)))
                assert bottom.values["arx-payout"] == pytest.approx(300.0)
                assert top.values["arx-payout"] == pytest.approx(720.0)
                assert bottom.bounds["arx-payout"] == pytest.approx(0.0, abs=1e-9)
    # suppressing the 'm' class (k = 3) costs s × B per record instead: 2 × 120
    pol = Policy(quasi_identifiers={"sex": sex}, models=[KAnonymity(3)], insensitive=["x"], suppression_limit=0.5,
                 suppression="drop")
    found = anon.search("t", pol, metric=metric)
    assert found.best.node == (0,) and found.best.values["arx-payout"] == pytest.approx(240.0)
    with pytest.raises(PolicyError, match="publisher_loss"):
        ArxPublisherPayout(adversary_cost=2, adversary_gain=6, publisher_loss=-1, publisher_benefit=120)
    assert not math.isnan(found.best.values["arx-payout"])


def test_cli_no_attack_and_payout(tmp_path, capsys):
    """--no-attack GAIN:COST (k = 7 beside the bundled k = 5) and --payout: the search minimizes the payout loss and
    the release verifies; the journalist's needs --population, a malformed --payout is refused by name."""
    out = tmp_path / "release.duckdb"
    assert main(["-o", str(out), "--no-attack", "120:20", "--payout", "20:120:3000:1200"]) == 0
    assert "with arx-payout = " in capsys.readouterr().out
    verification = duckanon.verify(out)
    assert verification.holds, verification.summary()
    assert verification.frame()["guarantee"].str.startswith("no-attack-profitability-prosecutor").any()
    assert main(["-o", str(tmp_path / "j.duckdb"), "--no-attack", "120:20:journalist"]) == 2
    assert "--no-attack GAIN:COST:journalist needs --population" in capsys.readouterr().err
    assert main(["-o", str(tmp_path / "p.duckdb"), "--payout", "1:2:3"]) == 2


# ------------------------------------------------------------------------------------------ with an attack
def paying(sample: pd.DataFrame, population: pd.DataFrame | None, levels: dict[str, int], terms: dict
           ) -> pd.DataFrame:
    """Per class of ``sample`` at ``levels``: its records, population records, information loss and whether keeping
    it pays the publisher, by ARX's definitions over pandas: a value's domain share is the share of the hierarchy's rows
    that generalize to it (one row for an original value), IL = 1 + Σ log10 shares / log10 Π rows, clamped to [0, 1];
    the adversary succeeds with 1 / the class's records (or population records, given a population) and attacks when
    G × that − C > 0; the publisher gains B × (1 − IL), less L × the success when attacked."""
    qis = list(HIERARCHIES)
    classes = generalized(sample, levels).groupby(qis).size().rename("records").to_frame()
    if population is not None:
        counted = generalized(population, levels).groupby(qis).size()
        classes["people"] = counted.reindex(classes.index).fillna(0).astype(int)
    most = sum(math.log10(len(rows)) for rows in HIERARCHIES.values())
    logs = np.zeros(len(classes))
    for position, q in enumerate(qis):
        rows, level = HIERARCHIES[q], levels[q]
        covered = pd.Series([str(row[level]) for row in rows]).value_counts()
        labels = classes.index.get_level_values(position)
        logs += [math.log10((1 if level == 0 else covered[label]) / len(rows)) for label in labels]
    classes["loss"] = np.clip(1 + logs / most, 0, 1)
    people_ = classes["people"] if population is not None else classes["records"]
    success = 1 / people_.where(people_ > 0, classes["records"])
    attacked = terms["adversary_gain"] * success - terms["adversary_cost"] > 0
    classes["payout"] = (terms["publisher_benefit"] * (1 - classes["loss"])
                         - np.where(attacked, terms["publisher_loss"] * success, 0.0))
    classes["pays"] = classes["payout"] > 0
    return classes


TERMS = st.fixed_dictionaries({"adversary_gain": st.sampled_from([0.0, 6.0, 50.0, 1200.0]),
                               "adversary_cost": st.sampled_from([0.0, 2.0, 3.0, 20.0]),
                               "publisher_loss": st.sampled_from([0.0, 300.0, 3000.0]),
                               "publisher_benefit": st.sampled_from([0.0, 120.0, 1200.0])})


def attack_models(terms: dict) -> list:
    return [ProsecutorProfitability(**terms), JournalistProfitability(**terms, population="population")]


def test_attack_by_hand():
    """Six records over sex ('f' ×4, 'm' ×2), two values in the hierarchy: at the bottom IL = 1 + log10(1/2) /
    log10(2) = 0.  With G = 6, C = 2, L = 300, B = 120, an attack pays on 'm' (6/2 − 2 > 0): 120 − 300/2 = −30, so
    'm' violates; 'f' pays 120.  At the top, '*' has IL = 1 and pays 0: it violates, and under ``replace`` the
    suppressed records' own class of '*' violates too, so only ``replace-unchecked`` and ``drop`` suppress."""
    anon, sex = six_over_sex()
    model = ProsecutorProfitability(adversary_gain=6, adversary_cost=2, publisher_loss=300, publisher_benefit=120)

    def pol(suppression: str) -> Policy:
        return Policy(quasi_identifiers={"sex": sex}, models=[model], insensitive=["x"], suppression_limit=1.0,
                      suppression=suppression)

    bottom = anon.check("t", pol("replace-unchecked"), {"sex": 0})
    assert (bottom.violating_records, bottom.violating_classes) == (2, 1)
    assert bottom.within_limit
    assert not anon.check("t", pol("replace"), {"sex": 0}).within_limit  # '*' × 2 pays nothing
    assert anon.check("t", pol("drop"), {"sex": 0}).within_limit
    top = anon.check("t", pol("replace-unchecked"), {"sex": 1})
    assert (top.violating_records, top.violating_classes) == (6, 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_attack_models_suppress_what_pandas_prices(seed):
    rng = np.random.default_rng(seed)
    population = people(rng, 800)
    sample = population.sample(200, random_state=seed)
    anon = connection(population[["zip", "age", "sex"]], sample)
    terms = {"adversary_gain": 50.0, "adversary_cost": 3.0, "publisher_loss": 300.0, "publisher_benefit": 120.0}
    for levels in ({"zip": 0, "age": 0, "sex": 0}, {"zip": 1, "age": 1, "sex": 0}, {"zip": 2, "age": 2, "sex": 1},
                   {"zip": 3, "age": 1, "sex": 1}, {"zip": 3, "age": 3, "sex": 1}):
        for model, population_ in zip(attack_models(terms), (None, population)):
            expected = paying(sample, population_, levels, terms)
            report = anon.check("people", policy([model], suppression_limit=1.0, suppression="replace-unchecked"),
                                levels)
            assert report.violating_records == int(expected["records"][~expected["pays"]].sum()), (model, levels)
            assert report.violating_classes == int((~expected["pays"]).sum()), (model, levels)


@pytest.mark.parametrize("kind", ["sql", "memory"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), people_=st.integers(40, 400), share=st.floats(0.05, 0.9), terms=TERMS)
def test_every_node_of_the_search_prices_as_pandas(kind, seed, people_, share, terms):
    """Each evaluator's suppressed records at every node equal the pandas recount, and so does, under ``replace``,
    whether the suppressed records' own class of '*' (IL 1; its population: everyone) pays."""
    drawn = sampled(seed, people_, share)
    if drawn is None:
        return
    anon, population, sample = drawn
    for model, population_ in zip(attack_models(terms), (None, population)):
        for suppression in ("replace-unchecked", "replace"):
            chosen = policy([model], suppression_limit=1.0, suppression=suppression)
            with bind(anon.workspace, "people", chosen) as bound, \
                    search_run.evaluator(anon.workspace, bound, [Discernibility()], None, kind=kind) as evaluator:
                results = evaluator.evaluate_many(range(evaluator.lattice.size))
                for index, result in enumerate(results):
                    levels = dict(zip(evaluator.lattice.attributes, result.node))
                    expected = paying(sample, population_, levels, terms)
                    records = int(expected["records"][~expected["pays"]].sum())
                    assert result.suppressed == records, (model, levels)
                    if suppression == "replace" and records:
                        success = 1 / (len(population) if population_ is not None else records)
                        attacked = terms["adversary_gain"] * success - terms["adversary_cost"] > 0
                        starred_pays = -(terms["publisher_loss"] * success if attacked else 0.0) > 0
                        assert evaluator.satisfies(index) == starred_pays, (model, levels)


@pytest.mark.parametrize("suppression", ["replace-unchecked", "drop"])
def test_a_release_keeps_only_classes_that_pay(tmp_path, suppression):
    """The search's release: every class it shows pays by pandas, the suppressed ones did not, its own verification
    passes, and a recipient's says the model is not recomputed (the domain shares need the hierarchies)."""
    rng = np.random.default_rng(5)
    population = people(rng, 2000)
    sample = population.sample(400, random_state=6)
    anon = connection(population[["zip", "age", "sex"]], sample)
    terms = {"adversary_gain": 120.0, "adversary_cost": 20.0, "publisher_loss": 3000.0, "publisher_benefit": 1200.0}
    for model, population_ in zip(attack_models(terms), (None, population)):
        target = tmp_path / f"{model.name}-{suppression}.duckdb"
        result, release = anon.anonymize("people", policy([model], suppression_limit=0.1, suppression=suppression),
                                         target, metric="dm")
        expected = paying(sample, population_, result.levels, terms)
        assert release.suppressed == int(expected["records"][~expected["pays"]].sum())
        with duckdb.connect(str(target), read_only=True) as reader:  # held while read: DuckDB 1.2 closes it early
            released = reader.execute("SELECT zip, age, sex FROM release").df()
        shown = released[released["zip"] != "*"].groupby(list(HIERARCHIES)).size()
        paid = expected[expected["pays"]]["records"]
        assert shown.sort_index().to_dict() == paid.sort_index().to_dict()
        verification = duckanon.verify(target)
        assert verification.holds, verification.summary()
        [unchecked] = [c for c in verification.checks if c.holds is None]
        assert unchecked.guarantee.startswith(model.name) and "hierarchies" in unchecked.recomputed


def test_attack_models_refuse_what_cannot_price_them(tmp_path):
    """Partitioning forms classes no hierarchy level describes: refused before anything is written; bad terms are
    named; the stored parameters rebuild the models."""
    anon = connection(people(np.random.default_rng(1), 300)[["zip", "age", "sex"]],
                      people(np.random.default_rng(1), 300))
    model = ProsecutorProfitability(120, 20, 3000, 1200)
    with pytest.raises(PolicyError, match="prices each class by the domain shares"):
        anon.mondrian("people", policy([KAnonymity(2), model]), tmp_path / "m.duckdb")
    assert not list(tmp_path.iterdir())
    with pytest.raises(PolicyError, match="publisher_benefit"):
        ProsecutorProfitability(120, 20, 3000, -1)
    for built in (model, JournalistProfitability(120, 20, 3000, 1200, "voters")):
        assert model_from_params(built.name, built.params()) == built


def test_cli_profitability(tmp_path, capsys):
    """--profitability COST:GAIN:LOSS:BENEFIT on the bundled data with ARX's suppression: the release verifies and
    names the model; the journalist's needs --population; a malformed one is refused by name."""
    out = tmp_path / "release.duckdb"
    assert main(["-o", str(out), "--profitability", "20:120:3000:1200", "--suppression", "replace-unchecked"]) == 0
    verification = duckanon.verify(out)
    assert verification.holds, verification.summary()
    assert verification.frame()["guarantee"].str.startswith("profitability-prosecutor").any()
    capsys.readouterr()
    assert main(["-o", str(tmp_path / "j.duckdb"), "--profitability", "20:120:3000:1200:journalist"]) == 2
    assert "--profitability COST:GAIN:LOSS:BENEFIT:journalist needs --population" in capsys.readouterr().err
    assert main(["-o", str(tmp_path / "p.duckdb"), "--profitability", "1:2:3"]) == 2
    assert "COST:GAIN:LOSS:BENEFIT[:journalist]" in capsys.readouterr().err
    assert not (tmp_path / "j.duckdb").exists() and not (tmp_path / "p.duckdb").exists()


@pytest.mark.parametrize("kind", ["sql", "memory"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), people_=st.integers(60, 400), share=st.floats(0.1, 0.9), terms=TERMS,
       k=st.integers(1, 4))
def test_journalist_payout_as_arx_at_every_node(kind, seed, people_, share, terms, k):
    """ARX's publisher payout with a journalist (``createPublisherPayoutMetric(true)``) at every node against pandas:
    g × Σ over kept classes of n × (B − their payout, the adversary succeeding with 1 / their population records)
    + s × B × the suppressed records (g = s = 1 at the default gs-factor); without a population it is refused."""
    drawn = sampled(seed, people_, share)
    if drawn is None:
        return
    anon, population, sample = drawn
    metric = ArxPublisherPayout(**terms, journalist=True)
    chosen = policy([KAnonymity(k), duckanon.KMap(1, population="population")], suppression_limit=1.0,
                    suppression="replace-unchecked")
    with bind(anon.workspace, "people", chosen) as bound, \
            search_run.evaluator(anon.workspace, bound, [metric], None, kind=kind) as evaluator:
        results = evaluator.evaluate_many(range(evaluator.lattice.size))
    for result in results:
        classes = paying(sample, population, dict(zip(HIERARCHIES, result.node)), terms)
        kept = classes["records"] >= k
        expected = float((classes["records"] * (terms["publisher_benefit"] - classes["payout"]))[kept].sum()
                         + terms["publisher_benefit"] * classes["records"][~kept].sum())
        assert result.values[metric.name] == pytest.approx(expected, rel=1e-9, abs=1e-6), result.node
    with pytest.raises(PolicyError, match="arx-payout-journalist counts each class's records in a population"), \
            bind(anon.workspace, "people", policy([KAnonymity(k)])) as bound, \
            search_run.evaluator(anon.workspace, bound, [metric], None, kind=kind):
        pass


@pytest.mark.parametrize("suppression", ["replace-unchecked", "drop"])
def test_a_star_label_below_the_top_is_priced_as_a_label_not_as_suppression(tmp_path, suppression):
    """A hierarchy may generalize a rare value to '*' before the top: there it covers one of three rows (share 1/3,
    IL 0 on one attribute), not the whole domain a suppressed '*' stands for (IL 1).  The check and the publish price
    it alike: 30 'c' records pay B and are released; 'a' and 'b' (share 2/3 under 'ab') pay too."""
    frame = pd.DataFrame({"zip": ["a"] * 40 + ["b"] * 30 + ["c"] * 30, "x": range(100)})
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    zips = Hierarchy.from_lists([["a", "ab", "*"], ["b", "ab", "*"], ["c", "*", "*"]], name="zip")
    model = ProsecutorProfitability(adversary_gain=6, adversary_cost=2, publisher_loss=300, publisher_benefit=120)
    pol = Policy(quasi_identifiers={"zip": zips}, models=[model], insensitive=["x"], suppression_limit=1.0,
                 suppression=suppression)
    assert anon.check("t", pol, {"zip": 1}).violating_records == 0
    release = anon.publish("t", pol, {"zip": 1}, tmp_path / "release.duckdb")
    assert release.suppressed == 0 and release.records_out == 100
    with duckdb.connect(str(tmp_path / "release.duckdb"), read_only=True) as reader:
        assert reader.execute("SELECT COUNT(*) FROM release WHERE zip = '*'").fetchone() == (30,)
