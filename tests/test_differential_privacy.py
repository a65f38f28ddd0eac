"""(ε,δ)-differential privacy as SafePub: the derived β and k against the paper's formulas and ARX's values, the
mechanisms' distributions (seeded here only), the score functions against pandas, and the release's properties."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_data import ADULT_QIS, adult_setup, on_every_evaluator, setup_table, tables

import duckanon
from duckanon import EDDifferentialPrivacy, KAnonymity, Policy
from duckanon.encode.binding import bind
from duckanon.errors import AnonymizationError, PolicyError
from duckanon.privacy.differential import (
    SecureRandom,
    SeededRandom,
    exponential_choice,
    sampling_parameters,
)
from duckanon.search import run as search_run
from duckanon.search import safepub
from duckanon.search.budget import SearchBudget
from duckanon.utility.metrics import (
    DiscernibilityScore,
    GranularityScore,
    GroupSizeScore,
    IntensityScore,
)

# ARX 3.9.2's ParameterCalculation(ε, δ = 1e-5): k (benchmarks/arx_safepub/ArxSafePub.java, "params").
ARX_K = {0.45: 52, 0.5: 52, 0.9: 59, 1.0: 62, 1.8: 92, 2.0: 114, 2.7: 167, 3.0: 227}
# χ² critical values at p = 0.001 (degrees of freedom → value), so that a seeded test fails only on a real difference.
CHI2_999 = {3: 16.27, 5: 20.52, 10: 29.59}


def _delta_by_brute_force(k: int, epsilon: float, last: int = 4000) -> float:
    """d(k, β, ε) of SafePub eq. 3 summed term by term over every n from n_m to ``last`` (no Chernoff stop), each
    binomial term from lgamma: another computation than the library's."""
    beta = 1 - math.exp(-epsilon)
    gamma = (math.exp(epsilon) - 1 + beta) / math.exp(epsilon)
    largest = 0.0
    for n in range(max(math.ceil(k / gamma - 1), 1), last):
        tail = sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(beta)
                            + (n - j) * math.log1p(-beta)) for j in range(math.floor(gamma * n) + 1, n + 1))
        largest = max(largest, tail)
    return largest


def test_derived_k_and_beta_match_arx_and_the_papers_formula():
    for epsilon, arx_k in ARX_K.items():
        assert sampling_parameters(epsilon, 1e-5, "arx").k == arx_k
        paper = sampling_parameters(epsilon, 1e-5)
        assert paper.k == arx_k - 1  # ARX's loop ends one k past the smallest that meets δ
        assert paper.beta == pytest.approx(1 - math.exp(-epsilon), rel=1e-15)
    # The paper's k is the smallest whose d(k) is at most δ, by an independent brute force.
    for epsilon, delta in ((1.0, 1e-3), (0.5, 1e-2), (2.0, 1e-3)):
        k = sampling_parameters(epsilon, delta).k
        assert _delta_by_brute_force(k, epsilon) <= delta < _delta_by_brute_force(k - 1, epsilon)


def test_the_model_splits_the_budget_and_records_its_k():
    model = EDDifferentialPrivacy(1.0, 1e-5)
    assert model.search_epsilon == pytest.approx(0.1) and model.step_epsilon == pytest.approx(0.001)
    assert model.minimum_size == sampling_parameters(0.9, 1e-5).k == ARX_K[0.9] - 1
    assert EDDifferentialPrivacy(1.0, 1e-5, k_rule="arx").minimum_size == ARX_K[0.9]
    assert model.params()["k"] == model.minimum_size
    assert EDDifferentialPrivacy(**model.params()) == model  # a stored policy rebuilds it
    with pytest.raises(PolicyError, match="k=7 is recorded"):
        EDDifferentialPrivacy(1.0, 1e-5, k=7)


@pytest.mark.parametrize("given, parameter", [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": -1}, "epsilon"), ({"epsilon": math.inf}, "epsilon"),
    ({"epsilon": math.nan}, "epsilon"), ({"delta": 0}, "delta"), ({"delta": 1}, "delta"),
    ({"steps": 0}, "steps"), ({"search_epsilon": 1.0}, "search_epsilon"), ({"search_epsilon": 0}, "search_epsilon"),
    ({"k_rule": "other"}, "k_rule")])
def test_bad_parameters_are_refused_by_name(given, parameter):
    with pytest.raises(PolicyError, match=parameter):
        EDDifferentialPrivacy(**{"epsilon": 1.0, "delta": 1e-5, **given})


def _chi2(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_sampling_draws_each_record_with_beta():
    """Per group of 10 records, the records drawn follow Binomial(10, β) (χ² over 4,000 groups); the secure source's
    share over 200,000 records is within 5 standard deviations of β."""
    beta = 0.4
    counts = np.full(4000, 10)
    drawn = SeededRandom(11).sampled(counts, beta)
    observed = np.bincount(drawn, minlength=11).astype(float)
    pmf = np.array([math.comb(10, j) * beta ** j * (1 - beta) ** (10 - j) for j in range(11)])
    assert _chi2(observed, 4000 * pmf) < CHI2_999[10]
    # Groups of other sizes: every record is drawn once, none twice.
    uneven = SeededRandom(3).sampled(np.array([1, 1000, 7, 0, 50]), 0.9)
    assert (uneven <= [1, 1000, 7, 0, 50]).all() and uneven[3] == 0
    total = int(SecureRandom().sampled(np.array([200_000]), beta)[0])
    assert abs(total - 200_000 * beta) < 5 * math.sqrt(200_000 * beta * (1 - beta))


def test_sampling_in_chunks_keeps_the_records_one_draw_at_a_time_would(monkeypatch):
    """Drawn a few records at a time, groups spanning chunks included, each group keeps what comparing each of its
    records' uniform number with β keeps (counted here with a plain cumulative sum)."""
    from duckanon.privacy import differential

    class Given(differential.RandomSource):
        def __init__(self, numbers):
            self.numbers, self.used = numbers, 0

        def uniform(self, size):
            self.used += size
            return self.numbers[self.used - size:self.used]

    monkeypatch.setattr(differential, "_DRAW_CHUNK", 7)
    counts = np.array([3, 0, 10, 1, 25, 0, 4, 7])
    numbers = np.random.default_rng(3).random(int(counts.sum()))
    kept = np.concatenate(([0], np.cumsum(numbers < 0.4)))
    ends = np.cumsum(counts)
    assert list(Given(numbers).sampled(counts, 0.4)) == list(kept[ends] - kept[ends - counts])


def test_the_exponential_mechanism_draws_in_proportion_to_exp_of_half_epsilon_score():
    scores, epsilon = np.array([0.0, -1.0, -2.0, -5.0]), 2.0
    expected = np.exp(epsilon * scores / 2)
    expected /= expected.sum()
    random = SeededRandom(5)
    chosen = np.bincount([exponential_choice(scores, epsilon, random) for _ in range(20_000)], minlength=4)
    assert _chi2(chosen.astype(float), 20_000 * expected) < CHI2_999[3]
    # Scores far apart do not overflow: the best is all but certain.
    assert exponential_choice([0.0, -1e6], 1.0, SecureRandom()) == 0


def _generalized(frame: pd.DataFrame, hierarchies, levels) -> pd.DataFrame:
    """Each quasi-identifier's value replaced by its label on the node's level, by the hierarchy's rows."""
    return pd.DataFrame({q: frame[q].astype(str).map({row[0]: row[level] for row in hierarchies[q].rows})
                         for q, level in zip(hierarchies, levels)})


def _share(hierarchy, level: int):
    """ARX's domain share of each label on ``level``: the hierarchy's rows it covers over all rows (one row for an
    original value)."""
    if level == 0:
        return lambda label: 1 / len(hierarchy.rows)
    covered = pd.Series([row[level] for row in hierarchy.rows]).value_counts()
    return lambda label: covered[label] / len(hierarchy.rows)


def _scores_by_pandas(frame: pd.DataFrame, hierarchies, node, k: int, records: int) -> dict[str, float]:
    """SafePub's four scores of a node, from their definitions (ARX's getScore), over ``frame`` as the sample of a
    source of ``records`` records."""
    quasi = list(hierarchies)
    generalized = _generalized(frame, hierarchies, node)
    sizes = generalized.groupby(quasi).size()
    kept_classes = sizes[sizes >= k]
    suppressed = int(sizes[sizes < k].sum()) + records - len(frame)
    kept = generalized.merge(kept_classes.rename("size").reset_index(), on=quasi)
    d = len(quasi)
    shares = sum(kept[q].map(_share(hierarchies[q], level)).astype(float).sum() for q, level in zip(quasi, node))
    ratios = sum(level / (hierarchies[q].levels - 1) for q, level in zip(quasi, node))
    per_record = k - 1 if k > 1 else 1
    squared = k * k / (k - 1) + 1 if k > 1 else 5
    return {"safepub-granularity": -(d * suppressed + shares) / (d * per_record),
            "safepub-intensity": -(len(kept) * ratios + d * suppressed) / (d * per_record),
            "safepub-discernibility": -(float((kept_classes ** 2).sum()) + records * suppressed) / (records * squared),
            "safepub-group-size": len(kept_classes) + (1 if suppressed else 0)}


@on_every_evaluator
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=tables(), k=st.integers(1, 6), unsampled=st.integers(0, 30))
def test_scores_of_every_node_match_pandas(kind, data, k, unsampled):
    frame, hierarchies = data
    frame = frame[list(hierarchies)]
    con, anon = setup_table(frame)
    records = len(frame) + unsampled
    scores = [GranularityScore(k, records), IntensityScore(k, records), DiscernibilityScore(k, records),
              GroupSizeScore(k, records)]
    policy = Policy(hierarchies, [KAnonymity(k)], suppression="drop", suppression_limit=1.0, others="drop")
    with bind(anon.workspace, "t", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, scores, None, kind) as nodes:
        for index in range(nodes.lattice.size):
            node = nodes.lattice.node(index)
            expected = _scores_by_pandas(frame, hierarchies, node, k, records)
            values = nodes.evaluate(index).values
            for score in scores:
                assert -values[score.name] == pytest.approx(expected[score.name], rel=1e-9, abs=1e-9), (node, score)
    con.close()


@on_every_evaluator
def test_the_walk_picks_each_pivot_as_the_exponential_mechanism_says(kind):
    """One step from the top: the chosen specialization's frequency over 3,000 seeded walks against its probability
    ∝ exp(ε · score / 2) among the top's specializations; with more steps the result is the best-scored pivot."""
    con, anon, hierarchies = adult_setup(["sex", "race", "salary-class"])
    policy = Policy(hierarchies, [KAnonymity(3)], suppression="drop", suppression_limit=1.0, others="drop")
    score = GranularityScore(3, 30_162)
    with bind(anon.workspace, "adult", policy) as bound, \
            search_run.evaluator(anon.workspace, bound, [score], None, kind) as nodes:
        lattice = nodes.lattice
        top = lattice.index(lattice.top)
        below = list(lattice.predecessors(top))
        epsilon = 0.01
        scores = np.array([-nodes.value(i) for i in below])
        expected = np.exp(epsilon * (scores - scores.max()) / 2)
        expected /= expected.sum()
        random = SeededRandom(17)
        picked = [_walk(nodes, 1, epsilon, random) for _ in range(3000)]
        assert all(p in below for p in picked)  # every specialization scores better than the top here
        observed = np.array([picked.count(i) for i in below], dtype=float)
        assert _chi2(observed, 3000 * expected) < CHI2_999[3]
        # Every node of this small lattice is scored by now; a long walk ends on the best-scored pivot it visits,
        # which with a large ε is the best node of all.
        best = _walk(nodes, 40, 50.0, SeededRandom(2))
        assert -nodes.value(best) == max(-r.values[score.name] for r in nodes.results.values())
    con.close()


def _walk(nodes, steps: int, epsilon: float, random) -> int:
    budget = SearchBudget()
    budget.start(nodes, "safepub")
    return safepub.SafePubSearch(steps, epsilon, random).best_node(nodes, budget)


@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(ADULT_QIS)
    yield con, anon, hierarchies
    con.close()


def test_a_release_is_a_k_anonymous_generalization_of_a_sample_and_states_no_size(adult, tmp_path):
    """The release: every class at least the derived k (pandas), each class no larger than the source's records
    generalized alike, no more records than the source; it verifies (duckanon.verify, its view), states neither the
    source's size nor the records suppressed, records no score and no seed, and releases only the quasi-identifiers."""
    con, anon, hierarchies = adult
    model = EDDifferentialPrivacy(1.0, 1e-5, steps=20)
    policy = Policy(hierarchies, [model], others="drop")
    assert policy.suppression == "drop" and policy.suppression_limit == 1.0
    path = tmp_path / "dp.duckdb"
    result, release = safepub.anonymize(anon.workspace, "adult", policy, path, "loss", None, "release", None,
                                        random=SeededRandom(987654321))
    with duckdb.connect(str(path), read_only=True) as reader:
        released = reader.execute('SELECT * FROM "release"').df()
        view = reader.execute("SELECT guarantee, holds FROM release_verification").fetchall()
    assert set(released.columns) == {*ADULT_QIS, "age_low", "age_high"}  # the labels of age and their bounds
    sizes = released.groupby(ADULT_QIS).size()
    assert sizes.min() >= model.minimum_size
    source = con.execute("SELECT * FROM adult").df()
    generalized = _generalized(source, hierarchies, [result.levels[q] for q in hierarchies])
    available = generalized.groupby(ADULT_QIS).size()
    assert (sizes <= available.reindex(sizes.index)).all()
    assert len(released) == release.records_out <= len(source)
    assert all(holds for _, holds in view)
    verification = duckanon.verify(path)
    assert verification.holds
    assert [c.holds for c in verification.checks if "suppressed" in c.guarantee] == [None]  # withheld, not checked
    info = duckanon.read_release_info(path)
    assert info["source_records"] is None and info["suppressed_records"] is None and info["metrics"] == {}
    text = json.dumps(info, default=str)
    assert "987654321" not in text and "seed" not in text.lower()
    assert info["policy"]["models"][0]["params"]["k"] == model.minimum_size


def test_the_cli_releases_the_bundled_data_privately(tmp_path):
    done = subprocess.run([str(Path(sys.executable).with_name("duckanon")), "--differential-privacy", "2:1e-5:30",
                           "-o", "dp.duckdb"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("policy: ed-differential-privacy(epsilon=2.0, delta=1e-05, steps=30")
    assert any(line.startswith("SafePub: levels sex=") for line in done.stdout.splitlines())
    assert duckanon.verify(tmp_path / "dp.duckdb").holds


def test_what_safepub_does_not_release_is_refused_by_name_and_nothing_is_written(adult, tmp_path):
    _, anon, hierarchies = adult
    eight = {q: h for q, h in hierarchies.items() if q != "salary-class"}
    model = EDDifferentialPrivacy(1.0, 1e-5)
    path = tmp_path / "out.duckdb"
    cases = [
        (Policy(hierarchies, [model, KAnonymity(5)], others="drop"), {}, "enforced alone"),
        (Policy(eight, [model], sensitive=["salary-class"], others="drop"), {}, "salary-class"),
        (Policy(eight, [model], others="insensitive"), {}, "others='insensitive'"),
        (Policy(hierarchies, [model], suppression="replace", others="drop"), {}, "suppression='drop'"),
        (Policy(hierarchies, [model], suppression_limit=0.05, others="drop"), {}, "suppression_limit=1.0"),
        (Policy(hierarchies, [model], others="drop"), {"metric": "ncp"}, "metric 'ncp' has none"),
        (Policy(hierarchies, [model], others="drop"), {"strategy": "optimal"}, "strategy='optimal'"),
        (Policy(hierarchies, [model], others="drop"), {"time_limit": 5}, "time_limit=5"),
    ]
    for policy, options, message in cases:
        with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
            anon.anonymize("adult", policy, path, **options)
        assert not path.exists() and not list(tmp_path.iterdir())
    # Every other path would treat the whole source without the guarantee.
    private = Policy(hierarchies, [model], others="drop")
    levels = dict.fromkeys(hierarchies, 1)
    for other in (lambda: anon.search("adult", private), lambda: anon.check("adult", private, levels),
                  lambda: anon.publish("adult", private, levels, path), lambda: anon.encode("adult", private),
                  lambda: anon.mondrian("adult", private, path),
                  lambda: anon.anonymize_locally("adult", private, path)):
        with pytest.raises(PolicyError, match="is released by Anonymizer.anonymize .* alone, by SafePub"):
            other()
        assert not path.exists()
    with pytest.warns(UserWarning, match="delta=0.001 is at least 1/n"):
        anon.anonymize("adult", Policy(hierarchies, [EDDifferentialPrivacy(1.0, 1e-3, steps=5)], others="drop"),
                       path)
    with pytest.raises(AnonymizationError, match="report without source"):
        anon.report(path, tmp_path / "r.html", source="adult")


def test_a_policy_with_the_model_is_stored_and_rebuilt(adult):
    _, anon, hierarchies = adult
    policy = Policy(hierarchies, [EDDifferentialPrivacy(0.5, 1e-6, steps=10, search_epsilon=0.1)], others="drop")
    anon.save_policy("private", policy)
    stored = anon.policy("private")
    assert stored.models == policy.models and stored.suppression == "drop" and stored.suppression_limit == 1.0


def test_no_warning_for_a_delta_below_one_over_n_and_identifiers_are_dropped(adult, tmp_path):
    """Columns named identifiers (not only others='drop') leave the release; a δ below 1/n warns of nothing."""
    con, anon, hierarchies = adult
    others = [c for c in con.execute("SELECT * FROM adult LIMIT 0").df().columns if c not in hierarchies]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anon.anonymize("adult", Policy(hierarchies, [EDDifferentialPrivacy(3.0, 1e-6, steps=5)], identifiers=others),
                       tmp_path / "quiet.parquet")
    assert duckanon.verify(tmp_path / "quiet.parquet").holds
    released = duckdb.execute(f"SELECT * FROM read_parquet('{tmp_path / 'quiet.parquet'}') LIMIT 0").df().columns
    assert not set(others) & set(released)


def test_a_source_s_budget_refuses_the_release_that_would_exceed_it(tmp_path):
    """Sequential composition: two releases of ε = 1 fit a budget of 2.5; the third is refused before any work,
    naming what was spent, and writes nothing; the ledger lists both; the budget cannot drop below what was spent;
    another source's budget is its own."""
    con, anon, hierarchies = adult_setup(ADULT_QIS)
    policy = Policy(hierarchies, [EDDifferentialPrivacy(1.0, 2e-6, steps=5)], others="drop")
    declared = anon.set_privacy_budget("adult", 2.5, 1e-5)
    assert (declared.epsilon, declared.delta, declared.outputs) == (2.5, 1e-5, 0)
    for name in ("first", "second"):
        anon.anonymize("adult", policy, tmp_path / f"{name}.duckdb")
    with pytest.raises(PolicyError, match=r"privacy budget of 'adult' exceeded: .* needs ε = 1, δ = 2e-06, but 2 "
                                          r"outputs already spent ε = 2, δ = 4e-06 of the budget ε = 2.5, δ = 1e-05 "
                                          r"\(left: ε = 0.5, δ = 6e-06\)"):
        anon.anonymize("adult", policy, tmp_path / "third.duckdb")
    assert not (tmp_path / "third.duckdb").exists()
    spent = anon.privacy_spent("adult")
    assert list(spent["epsilon"]) == [1.0, 1.0] and list(spent["delta"]) == [2e-6, 2e-6]
    assert [Path(t).name for t in spent["target"]] == ["first.duckdb", "second.duckdb"]
    state = anon.privacy_budget("adult")
    assert (state.spent_epsilon, state.spent_delta, state.outputs) == (2.0, 4e-6, 2)
    with pytest.raises(PolicyError, match=r"below what 2 outputs already spent"):
        anon.set_privacy_budget("adult", 1.5, 1e-5)
    con.execute("CREATE TABLE other AS SELECT * FROM adult")
    anon.set_privacy_budget("other", 1.0, 2e-6)
    anon.anonymize("other", policy, tmp_path / "other.duckdb")  # exactly the budget: allowed
    for bad, name in (({"epsilon": 0}, "epsilon"), ({"epsilon": 1, "delta": 1}, "delta")):
        with pytest.raises(PolicyError, match=name):
            anon.set_privacy_budget("adult", **bad)
    con.close()


def test_a_ledger_file_is_shared_by_the_command_line_and_the_library(tmp_path):
    ledger = tmp_path / "ledger.duckdb"
    source = tmp_path / "adult.parquet"
    con, anon, hierarchies = adult_setup(ADULT_QIS)
    con.execute(f"COPY adult TO '{source}' (FORMAT parquet)")
    cli = [str(Path(sys.executable).with_name("duckanon"))]
    hierarchies_dir = str(duckanon.datasets.adult_hierarchy_dir())
    declared = subprocess.run([*cli, "budget", str(source), "--ledger", str(ledger), "--epsilon", "3", "--delta",
                               "1e-5"], capture_output=True, text=True, timeout=300)
    assert declared.returncode == 0, declared.stderr
    assert declared.stdout.startswith(f"{source.resolve()}: budget ε = 3, δ = 1e-05; spent ε = 0")
    anon.anonymize(str(source), Policy(hierarchies, [EDDifferentialPrivacy(2.0, 5e-6, steps=5)], others="drop"),
                   tmp_path / "library.duckdb", ledger=ledger)
    qis = [a for q in ADULT_QIS for a in ("--qi", q)]
    refused = subprocess.run([*cli, str(source), *qis, "--hierarchies", hierarchies_dir, "--others", "drop",
                              "--differential-privacy", "2:1e-6:5", "--ledger", str(ledger), "-o",
                              str(tmp_path / "cli.duckdb")], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "already spent ε = 2, δ = 5e-06" in refused.stderr
    assert not (tmp_path / "cli.duckdb").exists()
    shown = subprocess.run([*cli, "budget", str(source), "--ledger", str(ledger)], capture_output=True, text=True,
                           timeout=300)
    assert "spent ε = 2, δ = 5e-06 in 1 output" in shown.stdout and "library.duckdb" in shown.stdout
    assert anon.privacy_budget(source, ledger=ledger).spent_epsilon == 2.0
    assert anon.privacy_spent().empty  # the connection's own ledger holds nothing
    con.close()
