"""People with several records: signatures, people per class and exposure (duckanon.privacy.people) against a pandas
recomputation, on hand-made tables, on random ones with 1–50 records per person, and on the longitudinal data made
from Adult (duckanon.datasets.longitudinal)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sql_macros import MACROS, needs_macros

import duckanon
from duckanon import PersonExposure
from duckanon.cli import main, run
from duckanon.datasets.longitudinal import (
    MOST_VISITS,
    OLDEST,
    adult_visits,
    load_adult_visits,
)
from duckanon.errors import PolicyError


def pandas_exposure(frame: pd.DataFrame, quasi: list[str], person: str, k: int) -> PersonExposure:
    """The definition, by pandas: a class is a tuple of values (NULL as a value of its own), a signature the set of a
    person's classes."""
    classes = pd.Series(list(zip(*[frame[q].astype(object).where(frame[q].notna(), None) for q in quasi])),
                        index=frame.index)
    pairs = pd.DataFrame({"person": frame[person], "cls": classes})
    people_per_class = pairs.drop_duplicates().groupby("cls")["person"].nunique()
    small = set(people_per_class[people_per_class < k].index)
    signature = pairs.groupby("person")["cls"].agg(lambda c: frozenset(c))
    sharing = signature.map(signature.value_counts())
    return PersonExposure(k=k, records=len(frame), people=int(signature.size), classes=len(people_per_class),
                          signatures=int(signature.nunique()),
                          people_in_small_classes=int(pairs[pairs["cls"].isin(small)]["person"].nunique()),
                          people_below_k=int((sharing < k).sum()), unique_people=int((sharing == 1).sum()),
                          smallest_signature_group=int(sharing.min()))


def macro_exposure(frame: pd.DataFrame, quasi: list[str], person: str, k: int) -> PersonExposure:
    """The SQL macro anon_person_exposure's figures, as a PersonExposure."""
    con = duckdb.connect()
    con.execute(MACROS.read_text(encoding="utf-8"))
    con.register("records", frame)
    row = con.execute("SELECT * FROM anon_person_exposure('records', ?, ?, ?)", [quasi, person, k]).fetchone()
    con.close()
    people, records, classes, signatures, small, below, unique, smallest = row
    return PersonExposure(k=k, records=records, people=people, classes=classes, signatures=signatures,
                          people_in_small_classes=small, people_below_k=below, unique_people=unique,
                          smallest_signature_group=smallest)


def exposure(frame: pd.DataFrame, quasi: list[str], person: str, k: int) -> PersonExposure:
    con = duckdb.connect()
    con.register("records", frame)
    try:
        return duckanon.connect(con).person_exposure("records", quasi, person, k)
    finally:
        con.close()


def test_a_hand_made_table():
    # People 1 and 2 share {A, B}; 3 has {A} alone, 4 has {C} alone, and class C holds 4's two records only.
    frame = pd.DataFrame({"p": [1, 1, 2, 2, 3, 4, 4], "q": ["A", "B", "A", "B", "A", "C", "C"]})
    got = exposure(frame, ["q"], "p", 2)
    assert got == PersonExposure(k=2, records=7, people=4, classes=3, signatures=3, people_in_small_classes=1,
                                 people_below_k=2, unique_people=2, smallest_signature_group=1)
    assert "2 unique" in got.summary()


def test_the_command_line_measures_a_file(tmp_path, capsys):
    frame = pd.DataFrame({"p": [1, 1, 2, 2, 3, 4, 4], "q": ["A", "B", "A", "B", "A", "C", "C"]})
    frame.to_parquet(tmp_path / "records.parquet")
    assert run(["exposure", str(tmp_path / "records.parquet"), "--qi", "q", "--person", "p", "-k", "2"]) == 0
    assert capsys.readouterr().out.strip() == ("4 people with 7 records in 3 classes: 1 in a class of fewer than 2 "
                                               "people, 2 whose signature fewer than 2 people share (2 unique)")
    assert main(["exposure", str(tmp_path / "records.parquet"), "--qi", "nope", "--person", "p"]) == 2
    assert "['nope']" in capsys.readouterr().err


def test_values_that_concatenate_alike_stay_apart():
    # ('ab', 'c') and ('a', 'bc') are two classes; NULL is not the text '-' nor ''.
    frame = pd.DataFrame({"p": [1, 2, 3, 4, 5, 6], "x": ["ab", "a", None, "-", "", "1:-"],
                          "y": ["c", "bc", "z", "z", "z", None]})
    got = exposure(frame, ["x", "y"], "p", 2)
    assert (got.classes, got.signatures, got.unique_people) == (6, 6, 6)


RECORDS = st.integers(1, 50)


def random_records(people: list[int], seed: int, values: int) -> pd.DataFrame:
    """``people[i]`` records of person i, with random ages below ``values`` and zips (NULL among them)."""
    rng = np.random.default_rng(seed)
    person = np.repeat(np.arange(len(people)), people)
    return pd.DataFrame({
        "person": person,
        "age": rng.integers(0, values, len(person)),
        "zip": pd.Series(rng.choice(["a", "b", None], len(person)), dtype=object),
    })


@pytest.mark.parametrize("measure", [pytest.param(exposure, id="python"),
                                     pytest.param(macro_exposure, id="sql macro", marks=needs_macros)])
@settings(max_examples=30, deadline=None)
@given(people=st.lists(RECORDS, min_size=1, max_size=30), seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6),
       values=st.integers(1, 4))
def test_exposure_equals_pandas_for_1_to_50_records_per_person(measure, people, seed, k, values):
    frame = random_records(people, seed, values)
    assert measure(frame, ["age", "zip"], "person", k) == pandas_exposure(frame, ["age", "zip"], "person", k)


@pytest.mark.parametrize("call,message", [
    (lambda f: exposure(f, ["q"], "nobody", 2), "['nobody']"),
    (lambda f: exposure(f.assign(p=[1, None, 2]), ["q"], "p", 2), "'p' is NULL in 1 records"),
    (lambda f: exposure(f, ["q"], "p", 0), "k must be"),
    (lambda f: exposure(f, ["q", "p"], "p", 2), "also a quasi-identifier"),
])
def test_bad_input_is_one_error_naming_it(call, message):
    frame = pd.DataFrame({"p": [1, 1, 2], "q": ["A", "B", "A"]})
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call(frame)


@pytest.fixture(scope="module")
def visits() -> pd.DataFrame:
    return adult_visits()


def test_longitudinal_adult_is_people_with_1_to_50_visits_in_order(visits):
    per_person = visits.groupby("patient_id")
    counts = per_person.size()
    assert counts.min() == 1 and counts.max() == MOST_VISITS and len(counts) == 30_162
    assert 4 < counts.mean() < 5.5 and counts.median() == 3
    dates = pd.to_datetime(visits["visit_date"])
    assert (dates.groupby(visits["patient_id"]).diff().dropna() >= pd.Timedelta(0)).all()
    # Age at the visit: the first visit's age plus the whole years since, never above Adult's largest age.
    first = dates.groupby(visits["patient_id"]).transform("min")
    first_age = visits.groupby("patient_id")["age"].transform("first")
    expected = np.minimum(first_age + (dates - first).dt.days // 365, OLDEST)
    assert (visits["age"] == expected).all()
    assert visits.groupby("patient_id")[["sex", "race", "education"]].nunique().max().max() == 1
    pd.testing.assert_frame_equal(adult_visits(), visits)  # seeded
    assert not adult_visits(seed=1).equals(visits)


def test_the_longitudinal_table_in_duckdb_is_the_frame(visits):
    con = duckdb.connect()
    load_adult_visits(con)
    stored = con.execute("SELECT * FROM adult_visits ORDER BY patient_id, visit_date").df()
    assert list(stored.columns) == list(visits.columns)
    assert con.execute("SELECT data_type FROM information_schema.columns WHERE column_name = 'visit_date'"
                       ).fetchone()[0] == "DATE"
    assert len(stored) == len(visits) and (stored["patient_id"].to_numpy() == visits["patient_id"].to_numpy()).all()
    with pytest.raises(ValueError, match="exists"):
        load_adult_visits(con)


def test_a_release_counting_records_leaves_people_exposed_as_pandas_counts(visits, tmp_path):
    """The record-counting release of longitudinal Adult at k = 5, measured by people: duckanon's SQL gives what
    pandas gives, and people stay exposed although every class holds 5 records."""
    from duckanon import Hierarchy, KAnonymity, Policy
    from duckanon.datasets import adult_hierarchy_dir

    quasi = ["age", "sex", "race", "marital-status"]
    con = duckdb.connect()
    load_adult_visits(con)
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi},
                    models=[KAnonymity(5)], insensitive=["patient_id"], others="drop", suppression_limit=0.05)
    anon.publish("adult_visits", policy, {"age": 1, "sex": 0, "race": 0, "marital-status": 1},
                 tmp_path / "r.parquet")
    released = pd.read_parquet(tmp_path / "r.parquet")
    got = anon.person_exposure(tmp_path / "r.parquet", quasi, "patient_id", 5)
    assert got == pandas_exposure(released, quasi, "patient_id", 5)
    assert released.groupby(quasi).size().min() >= 5  # every class holds 5 records ...
    assert got.people_in_small_classes > 0 and got.unique_people > 0  # ... not always 5 people
