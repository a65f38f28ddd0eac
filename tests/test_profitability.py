"""ARX's game-theoretic no-attack models and the publisher-payout metric.

The derived k is checked against ARX's formula by hand (``ProfitabilityProsecutorNoAttack.initialize``); the models
against pandas group-bys (k-anonymity over the data, k-map over a population table); the payout metric by hand on a
small table, and on every node of random tables in ``test_arx_metrics.py`` against ARX's definition.  ARX's own test
cases run in ``benchmarks/bench_arx_cases.py``.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from test_population_models import HIERARCHIES, connection, generalized, people, policy

import duckanon
from duckanon import (
    ArxPublisherPayout,
    Hierarchy,
    JournalistNoAttackProfitability,
    KAnonymity,
    Policy,
    PolicyError,
    ProsecutorNoAttackProfitability,
)
from duckanon.cli import main
from duckanon.encode.binding import bind
from duckanon.privacy.profitability import no_attack_k
from duckanon.privacy.registry import model_from_params
from duckanon.search import run as search_run


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


def test_payout_by_hand():
    """Six records over sex ('f' ×4, 'm' ×2) at the bottom: the hierarchy has two values, so IL = 1 + log10(1/2) /
    log10(2) = 0 and every record pays B.  With G = 6, C = 2 an attack pays on classes below 3: the class of 'm'.
    Value: g × (B × 0 + L × 1 class) = 300.  At the top, '*' (share 1, IL 1), one class of 6: no attack pays,
    value 6 × B = 720."""
    frame = pd.DataFrame({"sex": ["f", "f", "f", "f", "m", "m"], "x": range(6)})
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    sex = Hierarchy.from_lists([["f", "*"], ["m", "*"]], name="sex")
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
