"""The seed-000 experiment's parts: its Adult hierarchies, the paper's Table 2 against weights computed here, and the
classifier-accuracy and table-printing helpers."""

from __future__ import annotations

import builtins
import io
import math

import numpy as np
import pandas as pd
import pytest
from sqlglot import exp

import duckanon
from duckanon import KAnonymity, Policy
from duckanon.datasets import ADULT_COMPLETE_RECORDS, load_adult
from duckanon.engine import as_engine
from duckanon.hierarchy.hierarchy import TOP
from duckanon.sqlgen import build as sb
from duckanon.utility.weights import attribute_weights
from experiments.adult_seed000 import (
    LABEL,
    PAPER_ACCURACY_NOTE,
    PAPER_WEIGHTS,
    SEED000_QUASI_IDENTIFIERS,
    seed000_hierarchies,
)
from experiments.common import classifier_accuracy, markdown_table

QUASI_IDENTIFIERS = list(SEED000_QUASI_IDENTIFIERS)


@pytest.fixture
def adult(con):
    return load_adult(con, "adult")


@pytest.fixture
def adult_frame(con, adult):
    return as_engine(con).frame(exp.select(exp.Star()).from_(sb.table(adult)))


def test_hierarchies_cover_every_complete_record(con, adult):
    hierarchies = seed000_hierarchies(con, adult)
    assert list(hierarchies) == QUASI_IDENTIFIERS
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(2)], others="insensitive")
    # Binding the policy checks that every hierarchy covers every value of its column.
    report = duckanon.connect(con).check(adult, policy, levels={q: 0 for q in QUASI_IDENTIFIERS})
    assert report.records == ADULT_COMPLETE_RECORDS
    top = {q: h.height for q, h in hierarchies.items()}
    assert duckanon.connect(con).check(adult, policy, levels=top).satisfied


def test_hierarchies_are_trees_ending_in_one_root(con, adult):
    for name, hierarchy in seed000_hierarchies(con, adult).items():
        assert hierarchy.level_values(hierarchy.height) == [TOP], name
        for level in range(1, hierarchy.levels):
            # Each level merges values of the level below (the constructor already rejects two parents).
            assert len(hierarchy.level_values(level)) <= len(hierarchy.level_values(level - 1)), name


def test_lattice_size_and_shapes(con, adult):
    hierarchies = seed000_hierarchies(con, adult)
    levels = {q: h.levels for q, h in hierarchies.items()}
    assert levels == {"age": 5, "education-num": 4, "capital-gain": 4, "hours-per-week": 4, "race": 2,
                      "relationship": 3, "workclass": 3, "native-country": 3, "marital-status": 3, "occupation": 3,
                      "sex": 2}
    assert math.prod(levels.values()) == 311_040
    rows = {row[0]: row for row in hierarchies["capital-gain"].rows}
    # Every number of a hierarchy's labels has as many digits as its widest cut, so that labels sort as text.
    assert rows["0"] == ("0", "[000000, 000001)", "[000000, 000001)", TOP)
    assert rows["99999"] == ("99999", "[010000, 100000)", "[000001, 100000)", TOP)
    assert {row[0]: row[1] for row in hierarchies["education-num"].rows}["13"] == "[13, 17)"
    relationship = {row[0]: row[1] for row in hierarchies["relationship"].rows}
    assert relationship["Wife"] == relationship["Husband"] == "spouse"
    assert relationship["Unmarried"] == "no family"


def test_paper_table_2_is_complete():
    assert list(PAPER_WEIGHTS["attribute"]) == QUASI_IDENTIFIERS
    for column in ("loss", "entropy_loss", "mi_loss"):
        assert PAPER_WEIGHTS[column].sum() == pytest.approx(1, abs=0.002), column
    assert "89.23%" in PAPER_ACCURACY_NOTE and "0.73%-3.00%" in PAPER_ACCURACY_NOTE


def paper(column: str) -> np.ndarray:
    return PAPER_WEIGHTS.set_index("attribute").loc[QUASI_IDENTIFIERS, column].to_numpy()


def test_paper_entropy_weights_are_those_of_all_32561_records(con):
    """Table 2's Entropy Loss column is reproduced to its four decimals on all 32,561 records, missing values ("?")
    counting as a value; on the 30,162 complete ones it differs by up to 0.008 (workclass)."""
    load_adult(con, "adult_all", complete=False)
    ours = attribute_weights(con, "adult_all", QUASI_IDENTIFIERS, kind="entropy")["weight"].to_numpy()
    np.testing.assert_allclose(ours, paper("entropy_loss"), atol=1.5e-4)


def test_paper_mi_loss_weights_are_gain_ratios(con):
    """Table 2's MI Loss column is not normalized MI(Y, X_i) (formula 4): it matches normalized MI(Y, X_i) / H(X_i),
    C4.5's gain ratio, on all 32,561 records (within 0.002; age is the farthest).  The mutual information itself
    gives, e.g., age 0.11 instead of 0.036 and capital-gain 0.14 instead of 0.30."""
    load_adult(con, "adult_all", complete=False)
    entropy = attribute_weights(con, "adult_all", QUASI_IDENTIFIERS, kind="entropy")["score"].to_numpy()
    information = attribute_weights(con, "adult_all", QUASI_IDENTIFIERS, kind="mutual-information",
                                    label=LABEL)["score"].to_numpy()
    gain_ratio = information / entropy
    np.testing.assert_allclose(gain_ratio / gain_ratio.sum(), paper("mi_loss"), atol=0.002)
    assert np.abs(information / information.sum() - paper("mi_loss")).max() > 0.05


def test_classifier_accuracy_on_original_adult(adult_frame):
    pytest.importorskip("sklearn")
    accuracy = classifier_accuracy(adult_frame, QUASI_IDENTIFIERS, LABEL)
    assert set(accuracy) == {"logistic_regression", "decision_tree"}
    # 0.858 here; the paper's 89.23% is out of reach of these eleven features as categories under 3-fold CV.
    assert 0.84 <= accuracy["logistic_regression"] <= 0.87
    # 0.813: a fully grown tree over one-hot columns overfits.
    assert 0.78 <= accuracy["decision_tree"] <= 0.85


def test_classifier_accuracy_on_fully_suppressed_data_is_the_majority_share(adult_frame):
    pytest.importorskip("sklearn")
    suppressed = adult_frame.assign(**{q: TOP for q in QUASI_IDENTIFIERS})
    majority = adult_frame[LABEL].value_counts(normalize=True).max()
    accuracy = classifier_accuracy(suppressed, QUASI_IDENTIFIERS, LABEL)
    assert accuracy == {"logistic_regression": pytest.approx(majority, abs=1e-4),
                        "decision_tree": pytest.approx(majority, abs=1e-4)}


def test_classifier_accuracy_without_sklearn_names_the_eval_extra(monkeypatch, adult_frame):
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.split(".")[0] == "sklearn":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(ImportError, match=r"`eval` extra.*pip install .\.\[eval\]"):
        classifier_accuracy(adult_frame, QUASI_IDENTIFIERS, LABEL)


def test_classifier_accuracy_rejects_unknown_columns(adult_frame):
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match="'salary'"):
        classifier_accuracy(adult_frame, ["age"], "salary")


def test_markdown_table():
    frame = pd.DataFrame({"model": ["MI | Loss", None], "accuracy": [0.85813, float("nan")], "k": [2, 5]})
    assert markdown_table(frame) == (
        "| model | accuracy | k |\n"
        "| --- | ---: | ---: |\n"
        "| MI \\| Loss | 0.8581 | 2 |\n"
        "|  |  | 5 |"
    )


def test_samarati_experiment_evaluates_every_node_and_the_reports_vectors(con):
    """Seed 002's Samarati experiment on one (k, MaxSup): its lattice lists all 60 nodes (suppressed records are
    deleted, as in the report, so every node satisfies without a limit), and the report's vectors are evaluated with
    the records they suppress, as plain pandas counts them."""
    from experiments.common import Progress
    from experiments.seed002_samarati import paper_vectors_table, run_data_set

    anon = duckanon.connect(con)
    run = run_data_set(con, anon, Progress(stream=io.StringIO()), "complete", [(10, 100)])
    lattice = run["lattices"][10]
    assert len(lattice) == 60
    frame, hierarchies = run["frame"], run["hierarchies"]

    def suppressed(vec) -> int:
        generalized = pd.DataFrame({q: frame[q].astype(str).map({row[0]: row[level] for row in hierarchies[q].rows})
                                    for q, level in zip(frame.columns, vec)})
        sizes = generalized.groupby(list(generalized.columns))[generalized.columns[0]].transform("size")
        return int((sizes < 10).sum())

    for vec in [(0, 0, 0, 0), (1, 0, 1, 1), (4, 1, 1, 2)]:
        assert lattice.loc[[vec]].iloc[0]["suppressed"] == suppressed(vec)
    reported = paper_vectors_table(run)
    assert set(reported["k"]) == {10}
    for row in reported.to_dict("records"):
        vec = tuple(int(v) for v in row["paper vec"].strip("[]").split(", "))
        assert row["suppressed here"] == suppressed(vec)
    searched = run["searches"]
    assert (searched["suppressed"] <= 100).all() and not run["inconsistencies"]
