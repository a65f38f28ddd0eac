"""Longitudinal data from Adult: each of its people visits several times, so one person has several records.

Every complete Adult record is one person (``patient_id``).  Visits per person follow a log-normal law rounded to whole
visits, median 3 and σ 0.9, cut to 1–50: health-care use is skewed so, a few people visiting very often (mean about
4.5, one person in a hundred 25 times or more).  Visit dates fall in ``YEARS`` years from 2015, one person's in
order; the age is the age at the visit (the census age at the first visit, one year more for each year since, at most
90, Adult's largest age).  Sex, race, education, marital status, native country, workclass and occupation stay as the
census has them; each visit has a diagnosis (sensitive), more often chronic with age, and every person a synthetic
name, e-mail and phone number (identifiers, for pseudonyms and masks).

The same visits as two tables joined by ``patient_id`` (:func:`adult_patients_and_visits`): a person table of what
stays (sex, race, education, marital status, native country, workclass, occupation, the identifiers) and a visits
table of what changes (date, age at the visit, diagnosis).

Seeded: the same seed gives the same table.  Drawn with NumPy over the whole table at once.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import as_engine
from ..parameters import checked_number
from ..sqlgen import build as sb
from . import load_adult

VISITS_MEDIAN, VISITS_SIGMA, MOST_VISITS = 3, 0.9, 50
FIRST_DAY, YEARS = dt.date(2015, 1, 1), 8
OLDEST = 90
DIAGNOSES = ("checkup", "respiratory infection", "injury", "back pain", "hypertension", "diabetes", "depression",
             "heart disease")
# Per diagnosis, its weight below 40 and from 60 on (linear between): the chronic ones grow with age.
_YOUNG = np.array([30, 25, 15, 10, 5, 3, 8, 1], dtype=float)
_OLD = np.array([20, 12, 8, 12, 22, 12, 6, 14], dtype=float)


def adult_visits(seed: int = 27) -> pd.DataFrame:
    """The longitudinal table (see the module's text) as a DataFrame, one row per visit in person and date order."""
    checked_number(seed, "seed", "adult_visits", whole=True, low=0)
    con = duckdb.connect()
    try:
        load_adult(con, "adult")
        people = as_engine(con).frame(exp.select(exp.Star()).from_(sb.table("adult")))
    finally:
        con.close()
    rng = np.random.default_rng(seed)
    n = len(people)
    visits = np.clip(np.rint(np.exp(np.log(VISITS_MEDIAN) + VISITS_SIGMA * rng.standard_normal(n))), 1,
                     MOST_VISITS).astype(np.int64)
    person = np.repeat(np.arange(n), visits)
    days = (dt.date(FIRST_DAY.year + YEARS, 1, 1) - FIRST_DAY).days
    # Each person's visits in date order: sort the draws within a person (its rows are contiguous).
    day = rng.integers(0, days, len(person))
    day = day[np.lexsort((day, person))]
    first = np.minimum.reduceat(day, np.r_[0, np.cumsum(visits)[:-1]])[person]
    age = np.minimum(people["age"].to_numpy()[person] + (day - first) // 365, OLDEST)
    old = np.clip((age - 40) / 20, 0, 1)[:, None]
    weights = (1 - old) * _YOUNG + old * _OLD
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    diagnosis = (rng.random(len(person))[:, None] > cumulative).sum(axis=1)
    kept = ["sex", "race", "education", "marital-status", "native-country", "workclass", "occupation"]
    table = people[kept].iloc[person].reset_index(drop=True)
    ids = person + 100_000
    table.insert(0, "patient_id", ids)
    table.insert(1, "visit_date", pd.to_datetime(FIRST_DAY) + pd.to_timedelta(day, unit="D"))
    table.insert(2, "age", age.astype(np.int32))
    table["diagnosis"] = np.array(DIAGNOSES, dtype=object)[diagnosis]
    digits = pd.Series(ids).astype(str)
    table["name"] = "Patient " + digits
    table["email"] = "patient." + digits + "@example.org"
    table["phone"] = ("+1 555 " + pd.Series(ids // 1000).astype(str).str.zfill(3) + " "
                      + pd.Series(ids % 1000).astype(str).str.zfill(3))
    table["visit_date"] = table["visit_date"].dt.date
    return table


PERSON_COLUMNS = ("patient_id", "name", "email", "phone", "sex", "race", "education", "marital-status",
                  "native-country", "workclass", "occupation")
VISIT_COLUMNS = ("patient_id", "visit_date", "age", "diagnosis")


def adult_patients_and_visits(seed: int = 27) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`adult_visits` as a person table (one row per patient) and a visits table, joined by ``patient_id``."""
    visits = adult_visits(seed)
    people = visits.drop_duplicates("patient_id")[list(PERSON_COLUMNS)].reset_index(drop=True)
    return people, visits[list(VISIT_COLUMNS)]


def load_adult_visits(con: duckdb.DuckDBPyConnection, table: str = "adult_visits", *, seed: int = 27,
                      replace: bool = False) -> str:
    """Create table ``table`` (a quoted identifier) holding :func:`adult_visits`; return its name.  ValueError if it
    exists, unless ``replace``."""
    engine = as_engine(con)
    target = sb.table(table)
    if engine.exists(target) and not replace:
        raise ValueError(f"table {table!r} exists; pass replace=True to replace it")
    _created(engine, target, adult_visits(seed))
    return table


def load_adult_patients_and_visits(con: duckdb.DuckDBPyConnection, patients: str = "patients",
                                   visits: str = "visits", *, seed: int = 27, replace: bool = False
                                   ) -> tuple[str, str]:
    """Create tables ``patients`` and ``visits`` holding :func:`adult_patients_and_visits`; return their names.
    ValueError if one exists, unless ``replace``."""
    engine = as_engine(con)
    targets = sb.table(patients), sb.table(visits)
    existing = [t.name for t in targets if engine.exists(t)]
    if existing and not replace:
        raise ValueError(f"table {existing[0]!r} exists; pass replace=True to replace it")
    for target, frame in zip(targets, adult_patients_and_visits(seed)):
        _created(engine, target, frame)
    return patients, visits


def _created(engine, target: exp.Table, frame: pd.DataFrame) -> None:
    """``frame`` as table ``target`` (replacing one), its visit dates as DATE."""
    with engine.registered(frame) as registered:
        columns = [exp.cast(sb.col(c), "DATE").as_(c, quoted=True) if c == "visit_date" else sb.col(c)
                   for c in frame.columns]
        engine.run(sb.create_table_as(target, exp.select(*columns).from_(registered), replace=True))
