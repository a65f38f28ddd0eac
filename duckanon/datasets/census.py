"""A census-shaped table whose diversity grows with its size, for benchmarks at 10 million records and beyond.

Resampling a small table (Adult to 10M records) gives every combination hundreds of copies: the source is already
k-anonymous and a search has nothing to do.  Real large data, a census or a health interview survey, has more
distinct combinations as it grows.  These records are drawn person by person, shaped as the US population and as
IHIS (the Integrated Health Interview Series ARX benchmarks with) is, with its dependencies:

- ``state`` (51, by their 2010 census populations; generalized to census division, region, ``*``);
- ``year`` 1990–2019 and ``quarter`` of the interview (intervals of 5 and 10 years; half-years);
- ``age`` 0–99 (flat to 60, then falling to 2 % at 99; intervals of 5, 10, 20 years) and ``sex`` (women's share
  rising with age);
- ``marital`` status, by age band (children never married; widowhood with age);
- ``education`` by age (a child's by school age; an adult's by age and by the year, later cohorts longer schooled);
- ``race`` by state (each state's mix drawn once around the national one);
- ``household`` size 1–12 by age (children and parents in larger households).

Distinct combinations grow with the rows (979,213 at 1M records, 96 % of them of one record; 8,727,127 at 10M, 79 %
of one record), as fine geography, single years of age and the interview's date make them in real surveys, so a
k-anonymous generalization needs real search.  Records are drawn in chunks of :data:`CHUNK` with a generator seeded
by ``(seed, chunk)``: the same arguments give the same records, whatever reads them; memory stays one chunk's.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import as_engine
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import Hierarchy
from ..parameters import checked_number
from ..sqlgen import build as sb

#: Records drawn at a time.
CHUNK = 1_000_000

# (state, census division, 2010 population in thousands), by division.
_STATES = [
    ("CT", "New England", 3574), ("ME", "New England", 1328), ("MA", "New England", 6548),
    ("NH", "New England", 1316), ("RI", "New England", 1053), ("VT", "New England", 626),
    ("NJ", "Middle Atlantic", 8792), ("NY", "Middle Atlantic", 19378), ("PA", "Middle Atlantic", 12702),
    ("IL", "East North Central", 12831), ("IN", "East North Central", 6484), ("MI", "East North Central", 9884),
    ("OH", "East North Central", 11537), ("WI", "East North Central", 5687),
    ("IA", "West North Central", 3046), ("KS", "West North Central", 2853), ("MN", "West North Central", 5304),
    ("MO", "West North Central", 5989), ("NE", "West North Central", 1826), ("ND", "West North Central", 673),
    ("SD", "West North Central", 814),
    ("DE", "South Atlantic", 898), ("DC", "South Atlantic", 602), ("FL", "South Atlantic", 18801),
    ("GA", "South Atlantic", 9688), ("MD", "South Atlantic", 5774), ("NC", "South Atlantic", 9535),
    ("SC", "South Atlantic", 4625), ("VA", "South Atlantic", 8001), ("WV", "South Atlantic", 1853),
    ("AL", "East South Central", 4780), ("KY", "East South Central", 4339), ("MS", "East South Central", 2967),
    ("TN", "East South Central", 6346),
    ("AR", "West South Central", 2916), ("LA", "West South Central", 4533), ("OK", "West South Central", 3751),
    ("TX", "West South Central", 25146),
    ("AZ", "Mountain", 6392), ("CO", "Mountain", 5029), ("ID", "Mountain", 1568), ("MT", "Mountain", 989),
    ("NV", "Mountain", 2701), ("NM", "Mountain", 2059), ("UT", "Mountain", 2764), ("WY", "Mountain", 564),
    ("AK", "Pacific", 710), ("CA", "Pacific", 37254), ("HI", "Pacific", 1360), ("OR", "Pacific", 3831),
    ("WA", "Pacific", 6725),
]
_REGIONS = {"New England": "Northeast", "Middle Atlantic": "Northeast", "East North Central": "Midwest",
            "West North Central": "Midwest", "South Atlantic": "South", "East South Central": "South",
            "West South Central": "South", "Mountain": "West", "Pacific": "West"}

FIRST_YEAR, YEARS = 1990, 30
AGES = 100
# Age bands the conditional distributions change at: [0, 15), [15, 25), … [80, 100).
_BANDS = np.array([15, 25, 35, 50, 65, 80])

_MARITAL = {"never married": "single", "married": "partnered", "living with partner": "partnered",
            "separated": "previously married", "divorced": "previously married", "widowed": "previously married"}
# Per age band (rows) the share of each status (columns, in _MARITAL's order).
_MARITAL_BY_BAND = np.array([
    [1.00, 0.00, 0.00, 0.00, 0.00, 0.00],
    [0.82, 0.08, 0.08, 0.01, 0.01, 0.00],
    [0.38, 0.42, 0.12, 0.03, 0.05, 0.00],
    [0.16, 0.58, 0.07, 0.04, 0.14, 0.01],
    [0.09, 0.60, 0.05, 0.03, 0.19, 0.04],
    [0.05, 0.56, 0.03, 0.01, 0.13, 0.22],
    [0.04, 0.30, 0.01, 0.00, 0.07, 0.58],
])

_EDUCATION = {"none": "below high school", "grades 1-4": "below high school", "grades 5-8": "below high school",
              "grades 9-11": "below high school", "high school": "high school", "GED": "high school",
              "some college": "college", "associate": "college", "bachelor": "college", "master": "graduate",
              "professional": "graduate", "doctorate": "graduate"}
# An adult's education: shares for a person born in 1930 and in 2000 (in _EDUCATION's order), mixed linearly.
_EDUCATION_1930 = np.array([0.03, 0.06, 0.20, 0.14, 0.33, 0.03, 0.09, 0.03, 0.06, 0.02, 0.007, 0.003])
_EDUCATION_2000 = np.array([0.005, 0.005, 0.02, 0.07, 0.26, 0.04, 0.20, 0.10, 0.20, 0.07, 0.02, 0.01])

_RACE = {"White": "White", "Black": "Black", "Asian": "Asian", "American Indian": "other",
         "Pacific Islander": "other", "multiple": "other", "other": "other", "Hispanic White": "Hispanic",
         "Hispanic other": "Hispanic"}
_RACE_NATIONAL = np.array([0.63, 0.12, 0.05, 0.008, 0.002, 0.02, 0.01, 0.09, 0.07])

HOUSEHOLD = 12

QUASI_IDENTIFIERS = ["state", "year", "quarter", "age", "sex", "marital", "education", "race", "household"]


def census_hierarchies() -> dict[str, Hierarchy]:
    """The hierarchy of each column of :func:`generate_census` (a lattice of 38,880 nodes)."""
    return {
        "state": Hierarchy.from_lists([[s, d, _REGIONS[d], "*"] for s, d, _ in _STATES], name="state"),
        "year": Hierarchy.intervals(range(FIRST_YEAR, FIRST_YEAR + YEARS), widths=[5, 10], name="year"),
        "quarter": Hierarchy.from_lists([[f"Q{q}", f"H{(q + 1) // 2}", "*"] for q in range(1, 5)], name="quarter"),
        "age": Hierarchy.intervals(range(AGES), widths=[5, 10, 20], name="age"),
        "sex": Hierarchy.from_lists([["female", "*"], ["male", "*"]], name="sex"),
        "marital": Hierarchy.from_lists([[v, g, "*"] for v, g in _MARITAL.items()], name="marital"),
        "education": Hierarchy.from_lists([[v, g, "*"] for v, g in _EDUCATION.items()], name="education"),
        "race": Hierarchy.from_lists([[v, g, "*"] for v, g in _RACE.items()], name="race"),
        "household": Hierarchy.from_lists([[n, "1" if n == 1 else "2" if n == 2 else "3-4" if n <= 4 else "5+", "*"]
                                           for n in range(1, HOUSEHOLD + 1)], name="household"),
    }


def _drawn(rng: np.random.Generator, shares: np.ndarray) -> np.ndarray:
    """One category per row of ``shares`` (each row a distribution over the same categories)."""
    cumulative = np.cumsum(shares / shares.sum(axis=1, keepdims=True), axis=1)
    return np.minimum((rng.random(len(shares))[:, None] >= cumulative).sum(axis=1), shares.shape[1] - 1)


def _chunk(seed: int, index: int, count: int) -> pd.DataFrame:
    """Chunk ``index`` of the records: ``count`` people drawn by a generator seeded by ``(seed, index)``."""
    setup = np.random.default_rng([seed, 0])  # each state's race mix, the same in every chunk
    state_races = setup.dirichlet(_RACE_NATIONAL * 40, size=len(_STATES))
    rng = np.random.default_rng([seed, index + 1])
    population = np.array([p for *_, p in _STATES], dtype=float)
    state = rng.choice(len(_STATES), size=count, p=population / population.sum())
    years = np.linspace(0.8, 1.2, YEARS)
    year = FIRST_YEAR + rng.choice(YEARS, size=count, p=years / years.sum())
    ages = np.arange(AGES, dtype=float)
    age = rng.choice(AGES, size=count, p=(weights := np.where(ages <= 60, 1.0, np.maximum(0.02, 1 - (ages - 60) / 40)))
                     / weights.sum())
    female = rng.random(count) < 0.49 + 0.12 * np.clip((age - 50) / 50, 0, 1)
    band = np.searchsorted(_BANDS, age, side="right")
    marital = _drawn(rng, _MARITAL_BY_BAND[band])
    born = np.clip((year - age - 1930) / 70, 0, 1)[:, None]
    adult = (1 - born) * _EDUCATION_1930 + born * _EDUCATION_2000
    # A child is in school by age: none below 6, then grades by age, a year's spread either way.
    grade = np.clip(age - 6 + rng.integers(-1, 2, count), -1, 12)
    child = np.select([grade < 1, grade < 5, grade < 9, grade < 12], [0, 1, 2, 3], 4)
    education = np.where(age < 19, child, _drawn(rng, adult))
    race = _drawn(rng, state_races[state])
    # Larger households for children and their parents' ages; people alone more often when old.
    mean_size = np.where(age < 18, 4.2, np.where(age < 50, 3.0, np.where(age < 70, 2.1, 1.6)))
    household = np.clip(1 + rng.poisson(mean_size - 1), 1, HOUSEHOLD)
    return pd.DataFrame({
        "state": pd.Categorical.from_codes(state, [s for s, *_ in _STATES]),
        "year": year.astype(np.int16),
        "quarter": pd.Categorical.from_codes(rng.integers(0, 4, count), [f"Q{q}" for q in range(1, 5)]),
        "age": age.astype(np.int16),
        "sex": pd.Categorical.from_codes(female.astype(np.int8), ["male", "female"]),
        "marital": pd.Categorical.from_codes(marital, list(_MARITAL)),
        "education": pd.Categorical.from_codes(education, list(_EDUCATION)),
        "race": pd.Categorical.from_codes(race, list(_RACE)),
        "household": household.astype(np.int16),
    }, copy=False)


def _store(engine, target: exp.Table, frames: Iterable[pd.DataFrame], replace: bool) -> None:
    """``frames``' records as table ``target``, created from the first and appended to from the others; text as
    VARCHAR (a categorical column would arrive as an ENUM)."""
    for index, frame in enumerate(frames):
        with engine.registered(frame) as chunk:
            query = exp.select(*[exp.cast(sb.col(c), "VARCHAR").as_(c, quoted=True)
                                 if isinstance(frame[c].dtype, pd.CategoricalDtype) else sb.col(c)
                                 for c in frame.columns]).from_(chunk)
            engine.run(sb.create_table_as(target, query, replace=replace) if index == 0
                       else exp.insert(query, target))


def _chunks(rows: int, seed: int) -> Iterator[pd.DataFrame]:
    for index, start in enumerate(range(0, rows, CHUNK)):
        yield _chunk(seed, index, min(CHUNK, rows - start))


def generate_census(con: duckdb.DuckDBPyConnection, table: str, rows: int, *, seed: int = 0,
                    replace: bool = False) -> dict[str, Hierarchy]:
    """Create ``table`` with ``rows`` census-shaped records (see the module); their hierarchies."""
    rows = checked_number(rows, "rows", "census table", whole=True, low=1)
    seed = checked_number(seed, "seed", "census table", whole=True, low=0)
    try:
        _store(as_engine(con), sb.table(table), _chunks(rows, seed), replace)
    except duckdb.CatalogException as error:
        raise AnonymizationError(f"cannot create table {table!r} (replace=True replaces one): {error}") from error
    return census_hierarchies()


def write_census(folder: str | os.PathLike, rows: int, *, seed: int = 0, part_rows: int | None = None,
                 progress: Callable[[str], None] | None = None) -> Path:
    """Write ``rows`` census-shaped records as Parquet files of ``part_rows`` records each (by default ten chunks)
    into ``folder`` (which must not exist; it appears whole, renamed from a hidden one), for data larger than memory
    or than one table; a folder named ``*.parquet`` is read as one source.  The records are
    :func:`generate_census`'s."""
    rows = checked_number(rows, "rows", "census files", whole=True, low=1)
    seed = checked_number(seed, "seed", "census files", whole=True, low=0)
    part_rows = checked_number(10 * CHUNK if part_rows is None else part_rows, "part_rows", "census files",
                               whole=True, low=CHUNK)
    if part_rows % CHUNK:
        raise AnonymizationError(f"part_rows {part_rows} is not a multiple of the chunk, {CHUNK}")
    folder = Path(folder)
    if folder.exists():
        raise AnonymizationError(f"{folder} exists: census files are written into a new folder")
    partial = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # what a stopped run left
    partial.mkdir(parents=True)
    con = duckdb.connect()
    try:
        engine, part = as_engine(con), sb.table("census_part")
        chunks = _chunks(rows, seed)
        for number, start in enumerate(range(0, rows, part_rows)):
            _store(engine, part, itertools.islice(chunks, part_rows // CHUNK), replace=True)
            engine.write_parquet(exp.select(exp.Star()).from_(part), str(partial / f"part-{number:05d}.parquet"))
            if progress is not None:
                progress(f"census: {min(start + part_rows, rows):,} of {rows:,} records written")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        con.close()
    partial.rename(folder)
    return folder
