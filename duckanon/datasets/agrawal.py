"""Agrawal, Imielinski & Swami's synthetic classification data ("Database mining: a performance perspective", IEEE
TKDE 5(6), 1993), the data of the privacy-preserving data mining papers (Agrawal & Srikant 2000) and of seed 004.

Nine attributes of a loan applicant, drawn independently except where one depends on another:

=========== ==============================================================================================
salary      uniform on [20000, 150000]
commission  0 if salary >= 75000, else uniform on [10000, 75000]
age         uniform on the whole numbers 20..80
elevel      uniform on 0..4 (education level)
car         uniform on 1..20 (make of the car)
zipcode     uniform on 0..8 (nine zip codes)
hvalue      uniform on [0.5 k · 100000, 1.5 k · 100000] with k = 9 − zipcode (house value; k depends on the zip code)
hyears      uniform on 1..30 (years the house is owned)
loan        uniform on [0, 500000]
=========== ==============================================================================================

Ten classification functions F1–F10 put each record in Group A or B (:func:`classification_function`, as SQL
conditions): F1 on age; F2 age and salary; F3 age and elevel; F4 age, elevel and salary; F5 age, salary and loan;
F6 age and salary + commission; F7–F10 the sign of a "disposable income" built from salary, commission, loan, elevel
and — F10 — home equity.  The paper's constants are used (0.67 for two thirds).

The paper leaves k's dependence on the zip code open (k ∈ {0..9}); k = 9 − zipcode is the IBM generator's and MOA's
choice.  ``perturbation`` (the paper's perturbation factor, 0 by default) moves salary, commission (when not 0),
age, hvalue, hyears and loan after the class is assigned by up to that fraction of their range, uniformly, clipped to
the range (age and hyears rounded), as the IBM C generator does: the labels then hold for the unperturbed values.

Values are drawn with NumPy (seeded, chunk by chunk) and the labels computed in SQL while the table is written.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import as_engine
from ..errors import AnonymizationError, PolicyError
from ..sqlgen import build as sb

#: The attributes and their DuckDB types, in the paper's order.
ATTRIBUTES: dict[str, str] = {"salary": "DOUBLE", "commission": "DOUBLE", "age": "INTEGER", "elevel": "INTEGER",
                              "car": "INTEGER", "zipcode": "INTEGER", "hvalue": "DOUBLE", "hyears": "INTEGER",
                              "loan": "DOUBLE"}
FUNCTIONS = tuple(range(1, 11))
PERTURBED = ("salary", "commission", "age", "hvalue", "hyears", "loan")  # what the perturbation factor moves
GROUP_A, GROUP_B = "A", "B"
CHUNK = 1_000_000  # records drawn at a time (the draws do not depend on it)
_SHIFT = "__shift_"


def classification_function(number: int, relation: str | None = None) -> exp.Expression:
    """Function F``number`` (1-10) as a SQL condition that holds for Group A, over the attribute columns (of the
    table alias ``relation`` when given)."""
    if isinstance(number, bool) or number not in FUNCTIONS:
        raise PolicyError(f"Agrawal's classification functions are numbered 1 to 10, got {number!r}")

    def c(name: str) -> exp.Expression:
        return sb.col(name, relation)

    def within(value: exp.Expression, low: float, high: float) -> exp.Expression:
        return exp.and_(value >= sb.lit(low), value <= sb.lit(high))

    def among(value: exp.Expression, *choices: int) -> exp.Expression:
        return exp.In(this=value, expressions=[sb.lit(v) for v in choices])

    def either(condition: exp.Expression, then: exp.Expression, otherwise: exp.Expression) -> exp.Expression:
        return exp.or_(exp.and_(condition, then), exp.and_(exp.Not(this=exp.paren(condition)), otherwise))

    age, salary, elevel, loan = c("age"), c("salary"), c("elevel"), c("loan")
    young, middle, old = age < sb.lit(40), exp.and_(age >= sb.lit(40), age < sb.lit(60)), age >= sb.lit(60)

    def by_age(young_rule, middle_rule, old_rule) -> exp.Expression:
        return exp.or_(exp.and_(young, young_rule), exp.and_(middle, middle_rule), exp.and_(old, old_rule))

    total = exp.paren(salary + c("commission"))
    income = sb.lit(0.67) * total
    if number == 1:
        return exp.or_(young, old)
    if number == 2:
        return by_age(within(salary, 50000, 100000), within(salary, 75000, 125000), within(salary, 25000, 75000))
    if number == 3:
        return by_age(among(elevel, 0, 1), among(elevel, 1, 2, 3), among(elevel, 2, 3, 4))
    if number == 4:
        return by_age(
            either(among(elevel, 0, 1), within(salary, 25000, 75000), within(salary, 50000, 100000)),
            either(among(elevel, 1, 2, 3), within(salary, 50000, 100000), within(salary, 75000, 125000)),
            either(among(elevel, 2, 3, 4), within(salary, 50000, 100000), within(salary, 25000, 75000)))
    if number == 5:
        return by_age(
            either(within(salary, 50000, 100000), within(loan, 100000, 300000), within(loan, 200000, 400000)),
            either(within(salary, 75000, 125000), within(loan, 200000, 400000), within(loan, 300000, 500000)),
            either(within(salary, 25000, 75000), within(loan, 300000, 500000), within(loan, 100000, 300000)))
    if number == 6:
        return by_age(within(total, 50000, 100000), within(total, 75000, 125000), within(total, 25000, 75000))
    if number == 7:
        disposable = income - sb.lit(0.2) * loan - sb.lit(20000)
    elif number == 8:
        disposable = income - sb.lit(5000) * elevel - sb.lit(20000)
    elif number == 9:
        disposable = income - sb.lit(5000) * elevel - sb.lit(0.2) * loan - sb.lit(10000)
    else:
        hyears = c("hyears")
        equity = exp.Case().when(hyears < sb.lit(20), sb.lit(0)).else_(
            sb.lit(0.1) * c("hvalue") * exp.paren(hyears - sb.lit(20)))
        disposable = income - sb.lit(5000) * elevel + sb.lit(0.2) * exp.paren(equity) - sb.lit(10000)
    return exp.paren(disposable) > sb.lit(0)


def label_column(function: int) -> str:
    return f"class_f{function}"


def generate_agrawal(con: duckdb.DuckDBPyConnection, table: str, rows: int, *, functions: int | Sequence[int] = 1,
                     seed: int = 0, perturbation: float = 0.0, replace: bool = False) -> exp.Table:
    """Create ``table`` with ``rows`` records: the nine attributes and, for one function, its label ``class``
    ('A' or 'B'); for a list of functions, one label column ``class_f<i>`` each.  Seeded: the same arguments give the
    same table."""
    single = not isinstance(functions, Sequence)
    chosen = [functions] if single else list(functions)
    for number in chosen:
        classification_function(number)
    if not chosen or len(set(chosen)) != len(chosen):
        raise PolicyError(f"functions must be one number or distinct numbers from 1 to 10, got {functions!r}")
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise PolicyError(f"rows must be a whole number >= 1, got {rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PolicyError(f"seed must be a whole number >= 0, got {seed!r}")
    if isinstance(perturbation, bool) or not isinstance(perturbation, (int, float)) or not 0 <= perturbation <= 1:
        raise PolicyError(f"the perturbation factor is a fraction of the range in [0, 1], got {perturbation!r}")
    labels = {("class" if single else label_column(n)): classification_function(n, "g") for n in chosen}
    target = sb.table(table)
    engine = as_engine(con)
    try:
        for index, start in enumerate(range(0, rows, CHUNK)):
            frame = _draw(np.random.default_rng([int(seed), index]), min(CHUNK, rows - start), perturbation)
            with engine.registered(frame) as chunk:
                query = _query(chunk, labels, perturbation)
                engine.run(sb.create_table_as(target, query, replace=replace) if index == 0
                           else exp.insert(query, target))
    except duckdb.CatalogException as error:
        raise AnonymizationError(f"cannot create table {table!r} (replace=True replaces one): {error}") from error
    return target


def _draw(rng: np.random.Generator, n: int, perturbation: float) -> pd.DataFrame:
    salary = rng.uniform(20000, 150000, n)
    commission = np.where(salary >= 75000, 0.0, rng.uniform(10000, 75000, n))
    age = rng.integers(20, 81, n, dtype=np.int32)
    elevel = rng.integers(0, 5, n, dtype=np.int32)
    car = rng.integers(1, 21, n, dtype=np.int32)
    zipcode = rng.integers(0, 9, n, dtype=np.int32)
    hvalue = (9 - zipcode) * 100000.0 * rng.uniform(0.5, 1.5, n)
    hyears = rng.integers(1, 31, n, dtype=np.int32)
    loan = rng.uniform(0, 500000, n)
    columns = {"salary": salary, "commission": commission, "age": age, "elevel": elevel, "car": car,
               "zipcode": zipcode, "hvalue": hvalue, "hyears": hyears, "loan": loan}
    if perturbation > 0:
        for name in PERTURBED:
            columns[_SHIFT + name] = rng.uniform(-1.0, 1.0, n)
    return pd.DataFrame(columns, copy=False)


def _ranges(zipcode: exp.Expression) -> dict[str, tuple[exp.Expression, exp.Expression]]:
    """The perturbed attributes' ranges as SQL expressions (hvalue's depends on the record's zip code)."""
    k = exp.paren(sb.lit(9) - zipcode)
    return {"salary": (sb.lit(20000), sb.lit(150000)), "commission": (sb.lit(10000), sb.lit(75000)),
            "age": (sb.lit(20), sb.lit(80)), "hvalue": (sb.lit(50000) * k, sb.lit(150000) * k),
            "hyears": (sb.lit(1), sb.lit(30)), "loan": (sb.lit(0), sb.lit(500000))}


def _query(frame: exp.Table, labels: dict[str, exp.Expression], perturbation: float) -> exp.Select:
    ranges = _ranges(sb.col("zipcode", "g")) if perturbation > 0 else {}
    query = exp.select().from_(exp.alias_(frame, "g", quoted=True))
    for name, kind in ATTRIBUTES.items():
        value = sb.col(name, "g")
        if name in ranges:
            low, high = ranges[name]
            moved = value + sb.lit(perturbation) * exp.paren(high - low) * sb.col(_SHIFT + name, "g")
            moved = exp.func("LEAST", exp.func("GREATEST", moved, low), high)
            if kind == "INTEGER":
                moved = exp.func("ROUND", moved)
            if name == "commission":  # a zero commission (salary >= 75000) stays zero
                moved = exp.Case().when(value > sb.lit(0), moved).else_(sb.lit(0.0))
            value = moved
        query = query.select(exp.cast(value, exp.DataType.build(kind)).as_(name, quoted=True))
    for name, condition in labels.items():
        query = query.select(exp.Case().when(condition, sb.lit(GROUP_A)).else_(sb.lit(GROUP_B)).as_(name, quoted=True))
    return query
