"""Risk record by record, as a statistical office measures it (sdcMicro's definitions, cited per function): SUDA2's
minimal sample uniques and scores, and the individual risk of a sample drawn with weights (Benedetti–Franconi), with
the global risk they sum to; per stratum when strata are given.

DuckDB reads the source once into its distinct combinations of the key variables (and the stratum) with their record
count and weight sum (:func:`combinations`); what follows works on those arrays, one row per combination: records with
equal keys have equal figures.  A missing key value (NULL) is a value of its own when records are told apart by their
keys, as ``GROUP BY`` does, except where a function says it matches any value (sdcMicro's ``freqCalc``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import PolicyError
from ..parameters import checked_number
from ..sqlgen import build as sb

RECORDS, WEIGHT = "records", "weight"


def combinations(engine: Engine, relation: exp.Expression, variables: Sequence[str], strata: Sequence[str] = (),
                 weight: str | None = None) -> pd.DataFrame:
    """The distinct combinations of ``strata`` and ``variables`` in ``relation`` with their ``records`` and, given a
    ``weight`` column, the sum of its values (``weight``).  Refuses a weight that is missing or not positive on any
    record, naming the column and how many records."""
    variables, strata = list(variables), list(strata)
    if not variables:
        raise PolicyError("risk record by record needs at least one key variable")
    taken = [v for v in variables if v in strata]
    if taken:
        raise PolicyError(f"{taken[0]!r} is both a key variable and a stratum")
    columns = set(engine.columns(relation))
    missing = [c for c in [*variables, *strata, *([weight] if weight else [])] if c not in columns]
    if missing:
        raise PolicyError(f"column {missing[0]!r} is not in the source (it has {', '.join(sorted(columns))})")
    rows = relation.subquery("r") if isinstance(relation, exp.Select) else relation
    if weight is not None:
        kind = engine.types(relation)[weight]
        if not sb.is_numeric_type(kind):
            raise PolicyError(f"weight column {weight!r} holds {kind}, not numbers: sampling weights must be positive "
                              f"numbers")
        value = sb.col(weight)
        bad = exp.or_(value.is_(exp.Null()), value <= sb.lit(0))
        (count,), = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(rows).where(bad))
        if count:
            raise PolicyError(f"weight column {weight!r} is missing or not positive on {count} records: sampling "
                              f"weights must be positive numbers")
    keys = [sb.col(c) for c in [*strata, *variables]]
    sums = [exp.func("COUNT", exp.Star()).as_(RECORDS, quoted=True)]
    if weight is not None:
        sums.append(exp.cast(exp.func("SUM", sb.col(weight)), exp.DataType.build("DOUBLE")).as_(WEIGHT, quoted=True))
    return engine.frame(exp.select(*keys, *sums).from_(rows).group_by(*[k.copy() for k in keys]))


def _codes(frame: pd.DataFrame, variables: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per variable, each row's dense code (a missing value its own code) and whether it is missing; the number of
    codes per variable."""
    codes, missing, cards = [], [], []
    for variable in variables:
        column = frame[variable]
        code, uniques = pd.factorize(column, use_na_sentinel=False)
        codes.append(code.astype(np.int64))
        missing.append(column.isna().to_numpy())
        cards.append(max(len(uniques), 1))
    return np.array(codes), np.array(missing), cards


def _key(codes: np.ndarray, columns: Sequence[int], cards: Sequence[int]) -> np.ndarray:
    """One int64 key per row over ``columns`` (mixed radix, made dense again before it could overflow)."""
    key = np.zeros(codes.shape[1], dtype=np.int64)
    span = 1
    for column in columns:
        if span * cards[column] >= 2**62:
            key, uniques = pd.factorize(key)
            span = max(len(uniques), 1)
        key = key * cards[column] + codes[column]
        span *= cards[column]
    return key


def _group_sums(key: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``values`` over the rows with its key."""
    groups = pd.factorize(key)[0]
    return np.bincount(groups, weights=values)[groups]


# ------------------------------------------------------------------------------------------------------------ SUDA2

def suda_weights(variables: int, original_scores: bool = True) -> np.ndarray:
    """What an MSU of each size (1 … ``variables``) adds to its record's SUDA score (sdcMicro ``src/Suda2.h``): as
    Elliot et al. define it (``original_scores``), (M − size)!; otherwise sdcMicro's earlier IHSN scoring,
    (2^(M − size) − 1) · size! (M − size)! / M!.  sdcMicro scores fewer than three variables as three (it adds
    constant columns), and so does this."""
    m = max(variables, 3)
    sizes = np.arange(1, m + 1)
    if original_scores:
        return np.array([float(math.factorial(m - s)) for s in sizes])
    return np.array([(2.0 ** (m - s) - 1) * math.factorial(s) * math.factorial(m - s) / math.factorial(m)
                     for s in sizes])


@dataclass(frozen=True)
class Suda:
    """SUDA2 over a table's distinct combinations of the key variables.

    ``combinations``: per combination, its stratum and key values, ``records``, ``score`` (the SUDA score of each of
    its records: nonzero only for a sample unique), ``dis_score`` (DIS-SUDA), ``msus`` (its minimal sample uniques,
    each a tuple of variable names, smallest first) and a ``contribution`` per variable (the share of the score from
    MSUs holding it).  ``attribute_contributions``: per variable, its percentage of the total score (summing to more
    than 100: an MSU holds several).  ``msu_sets``: per set of variables, the records it is an MSU of."""

    variables: list[str]
    strata: list[str]
    max_size: int
    combinations: pd.DataFrame
    attribute_contributions: pd.DataFrame
    msu_sets: pd.DataFrame

    def why(self, most: int = 10) -> list[str]:
        """The most common reasons records are at risk, as text: "12 records unique on age × zip × sex"."""
        top = self.msu_sets.head(most)
        return [f"{n:,} record{'s' if n != 1 else ''} unique on {' × '.join(s)}"
                for s, n in zip(top["variables"], top["records"])]


def suda2(frame: pd.DataFrame, variables: Sequence[str], strata: Sequence[str] = (), max_size: int | None = None,
          dis_fraction: float = 0.01, original_scores: bool = True) -> Suda:
    """SUDA2 (Manning, Haglin and Keane 2008, as sdcMicro's ``suda2``) over ``frame``, distinct combinations of
    ``strata`` and ``variables`` with their ``records`` (:func:`combinations`), each stratum on its own.

    A minimal sample unique (MSU) of a record is a set of at most ``max_size`` variables (all by default) on which no
    other record of its stratum shares its values, while on every proper subset another does; a missing value never
    belongs to an MSU (sdcMicro ignores its item).  A record's score sums :func:`suda_weights` over its MSUs.  Its
    DIS-SUDA score (sdcMicro's, in its single precision where it computes in it): with U the records unique on all
    the variables, P those in pairs, f ``dis_fraction`` and Q = 1 + (8 − M) / 20, DIS = U f / (U f + P (1 − f)) and
    a scored record's DIS-SUDA is 1 / (1 + (U / DIS − U) / (score^Q · Σ_scored 1 / score^Q))."""
    variables, strata = list(variables), list(strata)
    m = len(variables)
    max_size = m if max_size is None else int(checked_number(max_size, "max_size", "SUDA2", whole=True, low=1,
                                                              high=m))
    dis_fraction = float(checked_number(dis_fraction, "dis_fraction", "SUDA2", low=0, high=1))
    weights = suda_weights(m, original_scores)
    frame = frame.reset_index(drop=True)
    n = len(frame)
    scores, dis = np.zeros(n), np.zeros(n)
    contributions = np.zeros((n, m))
    sets = list(_subsets(m, max_size))  # in this order, a record's MSUs are listed smallest first
    holders, held = [], []  # per MSU found: its record, and its set's position in ``sets``
    parts = [np.arange(n)] if not strata else list(frame.groupby(strata, dropna=False, sort=True).indices.values())
    for rows in parts:
        part = frame.iloc[rows]
        for number, positions in _msus(part, variables, sets):
            records, columns = rows[positions], sets[number]
            weight = weights[len(columns) - 1]
            scores[records] += weight
            contributions[np.ix_(records, columns)] += weight
            holders.append(records)
            held.append(np.full(len(records), number))
        counts = part[RECORDS].to_numpy()
        dis[rows] = _dis_scores(scores[rows], int((counts == 1).sum()), 2 * int((counts == 2).sum()), dis_fraction,
                                m)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(scores[:, None] > 0, contributions / scores[:, None], 0.0)
    names = [tuple(variables[c] for c in columns) for columns in sets]
    found = pd.DataFrame({"record": np.concatenate(holders) if holders else np.zeros(0, dtype=np.int64),
                          "set": np.concatenate(held) if held else np.zeros(0, dtype=np.int64)})
    listed = found.sort_values(["record", "set"]).groupby("record")["set"].agg(list)
    result = frame[[*strata, *variables, RECORDS]].copy()
    result["score"], result["dis_score"] = scores, dis
    result["msus"] = [[names[number] for number in numbers]
                      for numbers in listed.reindex(range(n)).map(lambda v: v if isinstance(v, list) else [])]
    for j, variable in enumerate(variables):
        result[f"contribution {variable}"] = shares[:, j]
    total = scores.sum()
    attribute = pd.DataFrame({"variable": variables, "contribution": 100 * contributions.sum(axis=0) / total
                              if total else np.zeros(m)})
    tally = found["set"].value_counts()
    msu_sets = pd.DataFrame({"variables": [names[number] for number in tally.index],
                             "size": [len(sets[number]) for number in tally.index],
                             "records": tally.to_numpy(dtype=np.int64)})
    msu_sets = msu_sets.sort_values(["records", "size", "variables"], ascending=[False, True, True],
                                    kind="stable").reset_index(drop=True)
    return Suda(variables, strata, max_size, result, attribute, msu_sets)


def _subsets(variables: int, max_size: int) -> Iterator[tuple[int, ...]]:
    """The sets of variable positions SUDA2 searches, smallest first, each size in lexicographic order."""
    for size in range(1, max_size + 1):
        yield from itertools.combinations(range(variables), size)


def _msus(part: pd.DataFrame, variables: Sequence[str], sets: Sequence[tuple[int, ...]]
          ) -> Iterator[tuple[int, np.ndarray]]:
    """Per set of ``sets`` (:func:`_subsets`) that is an MSU of some rows of ``part``: its position in ``sets`` and
    those rows.  A set is minimal for a row unique on it when the row is unique on none of the sets one variable
    smaller (searched before it)."""
    codes, missing, cards = _codes(part, variables)
    counts = part[RECORDS].to_numpy().astype(np.float64)
    candidates = np.flatnonzero(counts == 1)  # a record another shares on every variable has no MSU
    if not len(candidates):
        return
    unique_on: dict[tuple[int, ...], np.ndarray] = {(): np.zeros(len(candidates), dtype=bool)}
    size = 0
    for number, columns in enumerate(sets):
        if len(columns) > size:  # a new size: only the sets one smaller are read again
            size = len(columns)
            unique_on = {s: u for s, u in unique_on.items() if len(s) == size - 1}
        unique = _group_sums(_key(codes, columns, cards), counts)[candidates] == 1
        unique_on[columns] = unique
        minimal = unique & ~missing[list(columns)][:, candidates].any(axis=0)
        for drop in range(len(columns)):
            minimal &= ~unique_on[columns[:drop] + columns[drop + 1:]]
        if minimal.any():
            yield number, candidates[minimal]


def _dis_scores(scores: np.ndarray, uniques: int, paired: int, fraction: float, variables: int) -> np.ndarray:
    """sdcMicro's DIS-SUDA scores (``src/Suda2.h``; DIS and Q in single precision, as it computes them)."""
    out = np.zeros(len(scores))
    scored = scores > 0
    if not scored.any():
        return out
    f32 = np.float32
    dis = f32(uniques) * f32(fraction) / (f32(uniques) * f32(fraction) + f32(paired) * (f32(1) - f32(fraction)))
    q = float(f32(1) + (f32(8) - f32(variables)) / f32(20))
    adjust = float(np.sum(1.0 / scores[scored] ** q))
    spread = float(f32(uniques) / dis - f32(uniques))
    out[scored] = 1.0 / (1.0 + spread / (scores[scored] ** q * adjust))
    return out


# ---------------------------------------------------------------------------------------------- individual risk

def compatible_sums(frame: pd.DataFrame, variables: Sequence[str], columns: Sequence[str]) -> list[np.ndarray]:
    """Per row of ``frame``, the sums of each of ``columns`` over the rows compatible with it: equal on every
    variable, a missing value matching any (sdcMicro's ``freqCalc`` with alpha = 1)."""
    codes, missing, cards = _codes(frame, variables)
    return compatible_totals(codes, missing, cards, [frame[c].to_numpy().astype(np.float64) for c in columns])


def compatible_totals(codes: np.ndarray, missing: np.ndarray, cards: Sequence[int], values: Sequence[np.ndarray]
                      ) -> list[np.ndarray]:
    """Per row (a column of ``codes``, one row per variable, each below its ``cards``), the sums of each of
    ``values`` over the rows compatible with it, a ``missing`` value matching any.  Rows are grouped by which
    variables they miss, and each pair of such groups is matched on the variables both hold."""
    masks = np.zeros(codes.shape[1], dtype=np.int64)
    for j in range(codes.shape[0]):
        masks |= missing[j].astype(np.int64) << j
    sums = [np.zeros(codes.shape[1]) for _ in values]
    groups = {int(mask): np.flatnonzero(masks == mask) for mask in np.unique(masks)}
    for mask, rows in groups.items():
        for other, theirs in groups.items():
            shared = [j for j in range(codes.shape[0]) if not (mask | other) >> j & 1]
            both = np.concatenate([rows, theirs])
            key = _key(codes[:, both], shared, cards)
            ids, _ = pd.factorize(key)
            for total, value in zip(sums, values):
                per_key = np.bincount(ids[len(rows):], weights=value[theirs], minlength=ids.max() + 1)
                total[rows] += per_key[ids[:len(rows)]]
    return sums


def benedetti_franconi(fk: np.ndarray, weights: np.ndarray, method: str = "approx", qual: float = 1.0
                       ) -> np.ndarray:
    """Each record's individual risk from its key's sample frequency ``fk`` and the sum of its key's sampling
    ``weights`` Fk (Benedetti and Franconi; sdcMicro's ``indivRisk`` with ``survey=TRUE``): with pk = fk / Fk,
    fk = 1: pk / (1 − pk) · log(1 / pk); fk = 2: pk / (1 − pk) − (pk / (1 − pk))² log(1 / pk); above, ``approx``
    pk / (fk − (1 − pk)), ``exact`` the series sdcMicro sums (where it overflows double precision the
    approximation is taken: sdcMicro then returns NaN or infinity); 1 / fk where fk = Fk (a census); times
    ``qual``."""
    if method not in ("approx", "exact"):
        raise PolicyError(f"individual risk method must be 'approx' or 'exact', got {method!r}")
    qual = float(checked_number(qual, "qual", "individual risk", low=0))
    fk, big = np.asarray(fk, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    pk = fk / big
    risk = np.zeros(len(fk))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        odds = pk / (1 - pk)
        one, two = fk == 1, fk == 2
        risk[one] = odds[one] * np.log(1 / pk[one])
        risk[two] = odds[two] - odds[two] ** 2 * np.log(1 / pk[two])
        more = fk > 2
        risk[more] = pk[more] / (fk[more] - (1 - pk[more]))
        if method == "exact":  # a series per distinct (fk, pk), which keys with equal frequencies share
            pairs, back = np.unique(np.column_stack([fk[more], pk[more]]), axis=0, return_inverse=True)
            exact = np.array([_exact_risk(int(f), float(p)) for f, p in pairs])
            risk[more] = np.where(np.isfinite(exact[back.ravel()]), exact[back.ravel()], risk[more])
    census = fk == big
    risk[census] = 1 / fk[census]
    return risk * qual


def _exact_risk(f: int, p: float) -> float:
    """sdcMicro's exact individual risk for fk = ``f`` > 2 (``R/indivRisk.R``)."""
    try:
        a = (p ** (1 - f) - 1) / (f - 1)

        def b(i: int) -> float:
            return (f - 1 - i) ** 2 / ((i + 1) * (f - 2 - i)) * (p ** (i + 2 - f) - 1) / (p ** (i + 1 - f) - 1)

        series, product = 0.0, 1.0
        for m in range(f - 2):
            product *= b(m)
            series += (-1) ** (m + 1) * product
        return (p / (1 - p)) ** f * (a * (1 + series) + (-1) ** f * math.log(p))
    except (OverflowError, ZeroDivisionError):
        return math.nan


@dataclass(frozen=True)
class IndividualRisk:
    """Individual risk per combination of the key variables (``combinations``: its stratum and keys, ``records``,
    ``fk``, ``Fk`` and ``risk``), and the global risk: the expected re-identifications (Σ risk over records) and
    their share of the records, overall and (``by_stratum``) per stratum."""

    variables: list[str]
    strata: list[str]
    method: str
    combinations: pd.DataFrame
    expected_reidentifications: float
    global_risk: float
    by_stratum: pd.DataFrame | None

    def summary(self) -> str:
        return (f"individual risk ({self.method}): {self.expected_reidentifications:.2f} expected "
                f"re-identifications, global risk {self.global_risk:.4%} of "
                f"{int(self.combinations[RECORDS].sum()):,} records")


def individual_risk(frame: pd.DataFrame, variables: Sequence[str], strata: Sequence[str] = (),
                    weighted: bool = True, method: str = "approx", qual: float = 1.0) -> IndividualRisk:
    """sdcMicro's ``measure_risk`` over ``frame`` (:func:`combinations`, with ``weight`` when ``weighted``): each
    combination's fk and Fk counted over the compatible combinations of its stratum (:func:`compatible_sums`), its
    risk :func:`benedetti_franconi` (without weights 1 / fk, as sdcMicro's ``survey=FALSE``), and the global risk,
    Σ risk / n."""
    variables, strata = list(variables), list(strata)
    frame = frame.reset_index(drop=True)
    if weighted and WEIGHT not in frame:
        raise PolicyError("individual risk with sampling weights needs the weight column")
    fk, big = np.zeros(len(frame)), np.zeros(len(frame))
    parts = [np.arange(len(frame))] if not strata else list(
        frame.groupby(strata, dropna=False, sort=True).indices.values())
    summed = [RECORDS, WEIGHT] if weighted else [RECORDS]
    for rows in parts:
        sums = compatible_sums(frame.iloc[rows], variables, summed)
        fk[rows] = sums[0]
        big[rows] = sums[1] if weighted else sums[0]
    risk = benedetti_franconi(fk, big, method, qual) if weighted else 1 / fk
    result = frame[[*strata, *variables, RECORDS]].copy()
    result["fk"], result["Fk"], result["risk"] = fk, big, risk
    records = frame[RECORDS].to_numpy()
    expected = float((risk * records).sum())
    by_stratum = None
    if strata:
        grouped = result.assign(expected=risk * records).groupby(strata, dropna=False, sort=True)
        by_stratum = grouped.agg(records=(RECORDS, "sum"), expected_reidentifications=("expected", "sum")
                                 ).reset_index()
        by_stratum["global_risk"] = by_stratum["expected_reidentifications"] / by_stratum["records"]
    return IndividualRisk(variables, strata, method if weighted else "1/fk", result, expected,
                          expected / records.sum(), by_stratum)
