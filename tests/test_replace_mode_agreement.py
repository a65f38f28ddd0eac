"""Replace mode (the default): check, search and publish agree on whether a transformation satisfies a policy.

Suppressed records stay in the release with every quasi-identifier ``*``, so they form one class of their own, which
must satisfy the policy too.  Before this was shared, ``check`` counted only the violating records against the limit
and said a policy held where the search skipped the node and publishing refused it.  Every verdict here is computed
by hand with plain pandas group-bys.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_data import adult_setup, setup_table, tables

from duckanon import DistinctLDiversity, KAnonymity, Policy, PolicyNotSatisfied, TCloseness
from duckanon.cli import main as cli_main
from duckanon.encode.binding import bind
from duckanon.search import run as search_run

# The issue's node of Adult's eight quasi-identifiers (ARX's order): k = 10 leaves one class of 6 records, which
# suppressed alone would be a '*' class of 6 < 10.
ISSUE_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
ISSUE_NODE = dict(zip(ISSUE_QIS, (1, 1, 1, 2, 3, 2, 2, 1)))


def replace_verdict(frame: pd.DataFrame, quasi: list[str], sensitive: str, *, k: int, l: int,  # noqa: E741
                    allowed: int) -> tuple[int, bool]:
    """By hand: (violating records, whether replace mode accepts).  A class violates when smaller than k or with
    fewer than l distinct sensitive values; the violating records, replaced by '*', form one class that must not."""
    classes = frame.groupby(quasi, dropna=False, sort=False)
    bad = (classes[sensitive].transform("size") < k) | (classes[sensitive].transform("nunique") < l)
    starred = frame[bad]
    violating = len(starred)
    star_ok = violating == 0 or (violating >= k and starred[sensitive].nunique() >= l)
    return violating, violating <= allowed and star_ok


def generalized(frame: pd.DataFrame, hierarchies, levels) -> pd.DataFrame:
    """The records with each quasi-identifier replaced by its label on the given level (the hierarchy's rows)."""
    out = frame.copy()
    for attribute, hierarchy in hierarchies.items():
        rows = hierarchy.to_frame()
        mapping = dict(zip(rows.iloc[:, 0], rows.iloc[:, levels[attribute]]))
        out[attribute] = frame[attribute].astype(str).map(mapping)
    return out


@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(ISSUE_QIS)
    yield con, anon, hierarchies
    con.close()


def test_the_issue_node_fails_in_check_search_and_publish(adult, tmp_path):
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(10)], max_suppressed=9, others="insensitive")
    report = anon.check("adult", policy, ISSUE_NODE)
    assert (report.violating_records, report.violating_classes) == (6, 1)
    assert not report.within_limit and report.replaced_class_violates
    assert "would form a class that violates it too" in report.summary()
    with contextlib.ExitStack() as stack:
        bound = stack.enter_context(bind(anon.workspace, "adult", policy))
        for kind in ("sql", "memory"):
            ev = stack.enter_context(search_run.evaluator(anon.workspace, bound, ["loss"], None, kind))
            index = ev.lattice.index(tuple(ISSUE_NODE[q] for q in ev.lattice.attributes))
            assert ev.evaluate(index).within_limit and not ev.satisfies(index), kind
    with pytest.raises(PolicyNotSatisfied, match="would form a class"):
        anon.publish("adult", policy, ISSUE_NODE, tmp_path / "x.duckdb", table="adult")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_check_exits_1_on_the_issue_node(tmp_path, capsys):
    levels = ",".join(f"{q}={v}" for q, v in ISSUE_NODE.items())
    assert cli_main(["check", "-q", "-k", "10", "--max-suppressed", "9", "--levels", levels]) == 1
    assert "would form a class that violates it too" in capsys.readouterr().out


def test_t_closeness_check_counts_what_publish_needs(adult, tmp_path):
    # t = 0.15 over salary-class: the violating classes' records, starred, are far from the table's distribution.
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5), TCloseness("salary-class", 0.15)],
                    sensitive=["salary-class"], suppression_limit=0.6, others="insensitive")
    frame = con.execute("SELECT * FROM adult").df()
    source = generalized(frame, hierarchies, ISSUE_NODE)
    report = anon.check("adult", policy, ISSUE_NODE)
    shares = source.groupby(ISSUE_QIS, dropna=False)["salary-class"].value_counts(normalize=True).unstack(fill_value=0)
    overall = source["salary-class"].value_counts(normalize=True)
    distance = shares.sub(overall, axis=1).abs().sum(axis=1) / 2
    sizes = source.groupby(ISSUE_QIS, dropna=False).size()
    bad_keys = distance.index[(distance > 0.15 + 1e-9) | (sizes < 5)]
    bad = source.set_index(ISSUE_QIS).index.isin(bad_keys)
    star = source.loc[bad, "salary-class"].value_counts(normalize=True).reindex(overall.index, fill_value=0)
    star_violates = (star - overall).abs().sum() / 2 > 0.15 + 1e-9
    assert report.violating_records == int(bad.sum())
    assert report.replaced_class_violates == star_violates
    published = True
    try:
        anon.publish("adult", policy, ISSUE_NODE, tmp_path / "t.duckdb", table="adult")
    except PolicyNotSatisfied:
        published = False
    assert published == report.within_limit == (not star_violates and bad.sum() <= report.allowed_suppressed)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_check_search_and_publish_agree_with_pandas(data, tmp_path_factory):
    frame, hierarchies = data.draw(tables())
    quasi = list(hierarchies)
    k = data.draw(st.integers(1, 8))
    l = data.draw(st.integers(1, 2))  # noqa: E741
    share = data.draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
    models = [KAnonymity(k)] + ([DistinctLDiversity("s", l)] if l > 1 else [])
    policy = Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s"], suppression_limit=share,
                    others="insensitive")
    levels = {q: data.draw(st.integers(0, h.levels - 1)) for q, h in hierarchies.items()}
    con, anon = setup_table(frame)
    try:
        allowed = int(np.floor(share * len(frame)))
        violating, accepted = replace_verdict(generalized(frame, hierarchies, levels), quasi, "s", k=k, l=l,
                                              allowed=allowed)
        report = anon.check("t", policy, levels)
        assert (report.violating_records, report.within_limit) == (violating, accepted), report.summary()
        with contextlib.ExitStack() as stack:
            bound = stack.enter_context(bind(anon.workspace, "t", policy))
            assert bound.allowed_suppressed == allowed
            for kind in ("sql", "memory"):
                ev = stack.enter_context(search_run.evaluator(anon.workspace, bound, ["loss"], None, kind))
                index = ev.lattice.index(tuple(levels[q] for q in ev.lattice.attributes))
                result = ev.evaluate(index)
                assert (result.within_limit and ev.satisfies(index)) == accepted, kind
        path = tmp_path_factory.mktemp("release") / "t.duckdb"
        try:
            release = anon.publish("t", policy, levels, path, table="t")
        except PolicyNotSatisfied:
            assert not accepted
            assert not path.exists()
        else:
            assert accepted and release.suppressed == violating
    finally:
        con.close()
