"""Risk record by record: SUDA2 and the individual risk against sdcMicro's own expected values (its tests in
``sdcTools/sdcMicro``: ``tests/testthat/test_suda2.R``, ``test_indivRisk.R``, ``test_freqCalc.R``) and against
brute force with pandas on random tables."""

from __future__ import annotations

import itertools
import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon.cli import main
from duckanon.errors import PolicyError


def anonymizer(frame: pd.DataFrame):
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return duckanon.connect(con)


def per_record(frame: pd.DataFrame, result: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``result``'s row of each record of ``frame`` (matched on the keys, a missing value matching a missing one)."""
    marker = "\0missing"
    left, right = frame[keys].astype(object).fillna(marker), result.copy()
    right[keys] = right[keys].astype(object).fillna(marker)
    return left.merge(right, on=keys, how="left")


# sdcMicro's "suda2 book example" and "suda2 sdc guideline" (original scores).
BOOK = pd.DataFrame({"age": ["20s"] * 7 + ["60s"], "gender": ["male"] * 4 + ["female"] * 3 + ["male"],
                     "income": ["50k+", "50k+"] + ["50k-"] * 6,
                     "education": ["highschool"] * 4 + ["university", "highschool", "middleschool", "university"]})
GUIDELINE = pd.DataFrame({
    "Residence": ["Urban"] * 4 + ["Rural"] + ["Urban"] * 5,
    "Gender": ["Female", "Female", "Female", "Male", "Female", "Male", "Female", "Male", "Female", "Female"],
    "Education": ["Secondary incomplete", "Secondary incomplete", "Primary incomplete", "Secondary complete",
                  "Secondary complete", "Secondary complete", "Primary complete", "Post-secondary",
                  "Secondary incomplete", "Secondary incomplete"],
    "Labor": ["Employed", "Employed", "Non-LF", "Employed", "Unemployed", "Employed", "Non-LF", "Unemployed",
              "Non-LF", "Non-LF"]})


def test_suda2_scores_sdcmicros_examples():
    book = anonymizer(BOOK).suda2("t", list(BOOK))
    assert per_record(BOOK, book.combinations, list(BOOK))["score"].tolist()[4:] == [4, 2, 6, 8]
    guideline = anonymizer(GUIDELINE).suda2("t", list(GUIDELINE))
    assert per_record(GUIDELINE, guideline.combinations, list(GUIDELINE))["score"].tolist() == [
        0, 0, 6, 0, 12, 0, 6, 10, 0, 0]
    # "suda2 simple example contribution" 1-4: the contributions follow the variables, whatever their order.
    three = pd.DataFrame({"a": [2, 1, 1], "b": [0, 3, 0], "c": [0, 6, 0]})
    for order in (["a", "b", "c"], ["a", "c", "b"], ["c", "a", "b"], ["c", "b", "a"]):
        contributions = anonymizer(three).suda2("t", order).attribute_contributions
        expected = {"a": 50.0, "b": 37.5, "c": 37.5}
        assert contributions["contribution"].tolist() == [expected[v] for v in order]


def test_suda2_says_why_a_record_is_at_risk():
    book = anonymizer(BOOK).suda2("t", list(BOOK))
    last = per_record(BOOK, book.combinations, list(BOOK)).iloc[7]
    # 60s alone (size 1: 3! = 6) and male × university (size 2: 2! = 2) make its 8.
    assert last["msus"] == [("age",), ("gender", "education")]
    assert "1 record unique on age" in book.why()


@st.composite
def keyed(draw):
    """10-60 records over 3-4 key variables of 1-4 values each, some missing, a positive weight and a stratum."""
    variables = draw(st.integers(3, 4))
    records = draw(st.integers(10, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    frame = pd.DataFrame({f"v{j}": rng.integers(0, draw(st.integers(1, 4)), records).astype(float)
                          for j in range(variables)})
    if draw(st.booleans()):
        frame = frame.mask(rng.random(frame.shape) < 0.1)
    frame["w"] = rng.integers(1, 50, records).astype(float)
    frame["stratum"] = rng.integers(0, 2, records)
    return frame


def brute_msus(frame: pd.DataFrame, keys: list[str], max_size: int) -> list[list[tuple[str, ...]]]:
    """Each record's MSUs by definition: every set of at most ``max_size`` variables the record holds no missing
    value on, on which no other record has its values (missing equal to missing), and no proper subset of which is
    such a set."""
    text = frame[keys].astype(object).where(frame[keys].notna(), "missing")

    def unique(columns: tuple[str, ...]) -> pd.Series:
        return text.groupby(list(columns), dropna=False)[columns[0]].transform("size") == 1

    uniques = {c: unique(c) for size in range(1, max_size + 1) for c in itertools.combinations(keys, size)}
    found = []
    for row in range(len(frame)):
        held = [c for c in uniques if uniques[c].iloc[row] and frame.loc[row, list(c)].notna().all()]
        found.append(sorted([c for c in held if not any(set(o) < set(c) for o in held)], key=lambda c: (len(c), c)))
    return found


@given(frame=keyed(), limited=st.booleans())
@settings(max_examples=40, deadline=None)
def test_suda2_finds_the_minimal_sample_uniques_of_brute_force(frame, limited):
    keys = [c for c in frame if c.startswith("v")]
    max_size = 2 if limited else len(keys)
    suda = anonymizer(frame).suda2("t", keys, max_size=max_size)
    rows = per_record(frame, suda.combinations, keys)
    expected = brute_msus(frame, keys, max_size)
    assert rows["msus"].tolist() == expected
    m = max(len(keys), 3)
    scores = [sum(math.factorial(m - len(c)) for c in msus) for msus in expected]
    assert rows["score"].tolist() == scores
    # DIS-SUDA by sdcMicro's formula, recomputed here in double precision.
    sizes = frame[keys].astype(object).fillna("missing").value_counts().to_numpy()
    u, p = int((sizes == 1).sum()), 2 * int((sizes == 2).sum())
    scored = np.array([s for s in scores if s > 0], dtype=float)
    if len(scored):
        dis = u * 0.01 / (u * 0.01 + p * 0.99)
        q = 1 + (8 - len(keys)) / 20
        adjust = (1 / scored ** q).sum()
        expected_dis = [1 / (1 + (u / dis - u) / (s ** q * adjust)) if s > 0 else 0.0 for s in scores]
        assert np.allclose(rows["dis_score"], expected_dis, rtol=1e-5)


# sdcMicro's test_indivRisk.R: eight records, three key variables and weights.
WEIGHTS = [18.0, 45.5, 39.0, 17.0, 92.0, 8.0, 123.5, 51]
B = [3, 3, 3, 3, 3, 3, 4, 3]
COMPLETE = pd.DataFrame({"A": [2, 3, 2, 2, 3, 3, 1, 2], "B": B, "C": [1, 3, 1, 2, 1, 1, 1, 1], "w": WEIGHTS})
MISSING = pd.DataFrame({"A": [2, 3, 2, 2, 3, 3, 1, None], "B": B, "C": [1, 3, None, 2, 1, 1, None, 1], "w": WEIGHTS})
SDCMICRO = {
    ("complete", "approx", 1): [0.01369863, 0.08579129, 0.01369863, 0.17707583, 0.01877883, 0.01877883, 0.03931625,
                                0.01369863],
    ("complete", "approx", 2): [0.02739726, 0.17158258, 0.02739726, 0.35415167, 0.03755767, 0.03755767, 0.07863251,
                                0.02739726],
    ("complete", "exact", 1): [0.01355297, 0.08579129, 0.01355297, 0.17707583, 0.01877883, 0.01877883, 0.03931625,
                               0.01355297],
    ("complete", "exact", 2): [0.02710594, 0.17158258, 0.02710594, 0.35415167, 0.03755767, 0.03755767, 0.07863251,
                               0.02710594],
    ("missing", "approx", 1): [0.013698630, 0.085791288, 0.010554090, 0.032466112, 0.009836066, 0.009836066,
                               0.039316254, 0.005973716],
    ("missing", "approx", 2): [0.02739726, 0.17158258, 0.02110818, 0.06493222, 0.01967213, 0.01967213, 0.07863251,
                               0.01194743],
    ("missing", "exact", 1): [0.013552968, 0.085791288, 0.010504889, 0.032466112, 0.009756889, 0.009756889,
                              0.039316254, 0.005962551],
    ("missing", "exact", 2): [0.02710594, 0.17158258, 0.02100978, 0.06493222, 0.01951378, 0.01951378, 0.07863251,
                              0.01192510],
}


@pytest.mark.parametrize("case", sorted(SDCMICRO))
def test_individual_risk_is_sdcmicros(case):
    data, method, qual = case
    frame = COMPLETE if data == "complete" else MISSING
    risk = anonymizer(frame).individual_risk("t", ["A", "B", "C"], weight="w", method=method, qual=qual)
    rows = per_record(frame, risk.combinations, ["A", "B", "C"])
    assert np.allclose(rows["risk"], SDCMICRO[case], atol=5e-9)
    # freqCalc's fk and Fk (test_freqCalc.R; its data with missing values has A complete).
    unweighted = anonymizer(frame).individual_risk("t", ["A", "B", "C"])
    expected_fk = [3, 1, 3, 1, 2, 2, 1, 3] if data == "complete" else [3, 1, 4, 2, 3, 3, 1, 5]
    assert per_record(frame, unweighted.combinations, ["A", "B", "C"])["fk"].tolist() == expected_fk
    assert np.allclose(per_record(frame, unweighted.combinations, ["A", "B", "C"])["risk"],
                       [1 / f for f in expected_fk])
    assert math.isclose(risk.expected_reidentifications, sum(SDCMICRO[case]), abs_tol=1e-7)
    assert math.isclose(risk.global_risk, sum(SDCMICRO[case]) / 8, abs_tol=1e-8)


@given(frame=keyed(), stratified=st.booleans())
@settings(max_examples=40, deadline=None)
def test_individual_risk_counts_compatible_records_by_brute_force(frame, stratified):
    keys = [c for c in frame if c.startswith("v")]
    strata = ["stratum"] if stratified else []
    risk = anonymizer(frame).individual_risk("t", keys, weight="w", strata=strata)
    rows = per_record(frame.drop(columns=["w"]), risk.combinations.drop(columns=["records"]), [*strata, *keys])
    values = frame[keys].to_numpy(dtype=float)
    for i in range(len(frame)):
        match = np.all((values == values[i]) | np.isnan(values) | np.isnan(values[i]), axis=1)
        if stratified:
            match &= frame["stratum"].to_numpy() == frame["stratum"].iloc[i]
        assert rows["fk"].iloc[i] == match.sum()
        assert math.isclose(rows["Fk"].iloc[i], frame["w"].to_numpy()[match].sum())
    assert math.isclose(risk.expected_reidentifications, rows["risk"].sum(), rel_tol=1e-9)
    if stratified:
        per_stratum = rows.groupby("stratum")["risk"].agg(["sum", "size"])
        assert np.allclose(risk.by_stratum["expected_reidentifications"], per_stratum["sum"])
        assert np.allclose(risk.by_stratum["global_risk"], per_stratum["sum"] / per_stratum["size"])


def test_suda2_per_stratum_is_suda2_of_each_stratum():
    frame = pd.concat([GUIDELINE.assign(wave=1), BOOK.rename(columns=dict(zip(BOOK, GUIDELINE))).assign(wave=2)])
    keys = list(GUIDELINE)
    together = anonymizer(frame).suda2("t", keys, strata=["wave"]).combinations
    for wave, part in frame.groupby("wave"):
        alone = anonymizer(part.drop(columns="wave")).suda2("t", keys).combinations
        mine = together[together["wave"] == wave].drop(columns="wave")
        merged = alone.merge(mine, on=keys, suffixes=("", "_strata"))
        assert len(merged) == len(alone)
        assert np.allclose(merged["score"], merged["score_strata"])
        assert np.allclose(merged["dis_score"], merged["dis_score_strata"])


def test_bad_weights_and_columns_are_refused_by_name():
    frame = COMPLETE.assign(w=[1.0, 2.0, 0.0, 1.0, None, 3.0, 1.0, 1.0])
    anon = anonymizer(frame)
    with pytest.raises(PolicyError, match="weight column 'w' is missing or not positive on 2 records"):
        anon.individual_risk("t", ["A", "B"], weight="w")
    with pytest.raises(PolicyError, match="column 'Z' is not in the source"):
        anon.suda2("t", ["A", "Z"])
    with pytest.raises(PolicyError, match="'A' is both a key variable and a stratum"):
        anon.individual_risk("t", ["A", "B"], strata=["A"])
    with pytest.raises(PolicyError, match="max_size"):
        anon.suda2("t", ["A", "B", "C"], max_size=4)
    with pytest.raises(PolicyError, match="method must be 'approx' or 'exact'"):
        anonymizer(COMPLETE).individual_risk("t", ["A", "B"], weight="w", method="fast")


def test_the_risk_command_says_why_records_are_at_risk(tmp_path, capsys):
    path = tmp_path / "book.csv"
    BOOK.assign(w=[10.0, 20, 30, 40, 50, 60, 70, 80]).to_csv(path, index=False)
    keys = [argument for variable in BOOK for argument in ("--key", variable)]
    assert main(["risk", str(path), *keys, "--weight", "w"]) == 0
    out = capsys.readouterr().out
    assert "4 records have minimal sample uniques; highest score 8" in out
    assert "1 record unique on age" in out
    assert "expected re-identifications" in out
    assert main(["risk", str(path), *keys, "--weight", "income"]) == 2
    assert "weight column 'income' holds VARCHAR, not numbers" in capsys.readouterr().err


def test_the_report_says_why_records_are_at_risk_in_release_and_source(tmp_path):
    """The report's special uniques by set of quasi-identifiers, for the release and its source, against brute force
    over the file's rows (a suppressed value is missing); only counts and column names appear."""
    frame = GUIDELINE.assign(Income=[f"i{n}" for n in range(10)])
    anon = anonymizer(frame)
    keys = list(GUIDELINE)
    hierarchies = {k: duckanon.Hierarchy.from_lists([[v, "*"] for v in sorted(set(frame[k]))], name=k) for k in keys}
    policy = duckanon.Policy(quasi_identifiers=hierarchies, models=[duckanon.KAnonymity(1)], others="insensitive")
    release = anon.publish("t", policy, {k: 0 for k in keys}, tmp_path / "r.duckdb")
    anon.report(release, tmp_path / "r.html", source="t", tables=tmp_path / "tables.duckdb")
    with duckdb.connect(str(tmp_path / "tables.duckdb"), read_only=True) as reader:
        shown = reader.execute("SELECT * FROM report_special_uniques").df()
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        released = reader.execute("SELECT * FROM release").df()[keys].replace("*", None)
    for side, rows in (("release", released), ("source", frame[keys])):
        expected: dict[str, int] = {}
        for msus in brute_msus(rows.reset_index(drop=True), keys, 3):
            for msu in msus:
                expected[" × ".join(msu)] = expected.get(" × ".join(msu), 0) + 1
        got = dict(zip(shown["variables"], shown[f"{side} records"]))
        assert {k: v for k, v in got.items() if v} == expected
    html = (tmp_path / "r.html").read_text()
    section = html.split("Why records are at risk")[1].split("<h2>")[0]
    assert "Post-secondary" not in section and "Rural" not in section


def test_compatible_counts_are_freqcalcs():
    """sdcMicro's test_freqCalc.R "with missing values (weighted)": C missing on records 3 and 7 matches any value."""
    frame = COMPLETE.assign(C=[1, 3, None, 2, 1, 1, None, 1])
    risk = anonymizer(frame).individual_risk("t", ["A", "B", "C"], weight="w")
    rows = per_record(frame, risk.combinations, ["A", "B", "C"])
    assert rows["fk"].tolist() == [3, 1, 4, 2, 2, 2, 1, 3]
    assert rows["Fk"].tolist() == [108.0, 45.5, 125.0, 56.0, 100.0, 100.0, 123.5, 108.0]
