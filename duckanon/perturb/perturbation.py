"""Perturbation: publish new values of the private attributes instead of generalized ones.

Seed 004 (Li Guang, Wang Yadong, Su Xiaohong, "Privacy-preserving classification mining based on probability theory",
Computer Engineering 38(3), 2012) publishes, for each private numeric attribute, n new values drawn from the
attribute's smoothed empirical distribution, and re-associates them with the records by rank, so that any classifier
runs on the release unchanged.  :class:`EmpiricalSynthesis` is that method:

1. ``bins`` = k equal-width division points x_1 = min < … < x_k = max; n_1 counts the records at x_1 and n_j those in
   (x_{j-1}, x_j]; an empty count becomes 1 (smoothing);
2. F(x_j) = (n_1 + … + n_j) / Σ n, F = 0 below x_1 and linear between the points — so x_1 has probability F(x_1);
3. n new values are drawn by inverting F;
4. rank re-association: the new value of rank r replaces the original value of rank r (ties in the original broken at
   random), attribute by attribute; columns that are not private, such as the class label, stay with their record.

Categorical attributes are encoded as numbers, as the seed says: codes 0, 1, … in the order given (or sorted), and
the release holds the synthesized code.

**What it protects, plainly.**  The new values follow F, and rank r gets the r-th smallest new value, so a record's
released value is close to the r-th smallest original value — its own.  The release is each attribute put through a
monotone, nearly-identity map: ranks are kept exactly (Spearman ≈ 1), the released value is itself a good estimate of
the original, and an attacker who knows a handful of original records bounds every other record's value with
certainty (:mod:`duckanon.privacy.disclosure` measures all three; see ``experiments/README.md`` for the figures).  Someone who
knows an attribute's original values as a list — a published salary table without names — links every one of them to
its record.  The method keeps a classifier's accuracy because it keeps nearly everything.

The baselines: :class:`AdditiveNoise` adds uniform or Gaussian noise at a signal-to-noise ratio SNR = Var(X) /
Var(noise) (the seed's D(X)/D(r)); :class:`RandomizedResponse` keeps a category with probability ``keep`` and
otherwise replaces it by one of the other categories, chosen uniformly (the seed's reference [6] for two values,
[7]'s transition matrix for more).

**How it runs.**  The source is read once into a temporary table in which every record carries two seeded hashes of
all its columns, a 128-bit key that depends only on the seed and the record's contents.  The private columns and the
keys are fetched as NumPy arrays and put in the keys' order — a random order, the same for the same seed and
contents however the source is stored; ties between equal values are broken in it.  The methods run vectorized
(sorting, interpolation, random draws; attributes in parallel threads); the new columns are scanned back from NumPy and
joined to their records by key (records identical in every column share a key and are interchangeable: they are
joined once each, as distinct rows, to as many new rows); the release is written by
:func:`duckanon.release.files.write_release` in that random order, so its row order says nothing about the source's.
Every release is measured (:func:`duckanon.privacy.disclosure.disclosure_report`) and the measures are stored in its
``release_info`` rows with the method and its parameters — but never the seed, which would let anyone regenerate the
noise: keep it secret too.
"""

from __future__ import annotations

import itertools
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

from ..declare.roles import assign_roles, check_others, released_columns
from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import AnonymizationError, PolicyError, ReleaseCheckFailed
from ..parameters import checked_number
from ..privacy import disclosure
from ..privacy.disclosure import DisclosureReport, disclosure_report
from ..release.files import ReleaseContent, ReleaseInfo, release_format, write_release
from ..release.signing import Signer
from ..release.publish import Reportable
from ..sqlgen import build as sb

KEYS = ("__duckanon_key_1", "__duckanon_key_2")  # two seeded hashes of a record's columns
ORDER = "__duckanon_order"  # the release's row order
CODE, VALUE = "code", "value"
KEPT = "fingerprint of all kept columns"
_names = itertools.count()


# ======================================================================= the methods
class Perturbation(ABC):
    """How one private attribute's values are replaced.  ``perturb`` gets the values (numbers, or category codes
    0..len(categories)-1, ``categories`` the values in code order) in the records' random order and returns the
    released values in the same order."""

    name: str = ""
    numeric: bool = True       # releases numbers (False: releases categories)
    categorical: bool = False  # can perturb categorical attributes (as codes)
    bounded: bool = False      # released values lie within the original values' range

    @abstractmethod
    def perturb(self, values: np.ndarray, rng: np.random.Generator, categories: Sequence | None = None
                ) -> np.ndarray:
        ...

    @abstractmethod
    def describe(self) -> dict:
        ...

    def drawn(self, values: np.ndarray, rng: np.random.Generator, categories: Sequence | None = None
              ) -> tuple[np.ndarray, dict]:
        """The released values (as :meth:`perturb`) and what the release records of this draw beside
        :meth:`describe` (PRAM: the transition matrix it drew from); nothing by default."""
        return self.perturb(values, rng, categories), {}

    def noise_variance(self, values: np.ndarray) -> float:
        """The variance of what is added to the values: what a PCA attacker subtracts (0 when nothing is added)."""
        return 0.0


@dataclass(frozen=True)
class EmpiricalSynthesis(Perturbation):
    """Seed 004's method: new values from the smoothed, piecewise-linear empirical distribution on ``bins`` equal-width
    division points (the paper's k), re-associated by rank.  Categorical attributes are synthesized as codes."""

    bins: int
    name = "empirical-synthesis"
    categorical = True
    bounded = True

    def __post_init__(self):
        object.__setattr__(self, "bins", checked_number(
            self.bins, "bins", self.name, whole=True, low=2, note="the paper's k division points x_1 = min, ..., "
            "x_k = max"))

    def describe(self) -> dict:
        return {"method": self.name, "bins": int(self.bins)}

    def distribution(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The division points x_1..x_k and F(x_1)..F(x_k) of the smoothed empirical distribution function."""
        return self._distribution(np.sort(values))

    def _distribution(self, ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        low, high = float(ordered[0]), float(ordered[-1])
        if not low < high:
            raise AnonymizationError(f"a constant attribute (every value {low!r}) has no distribution to draw from")
        points = low + (high - low) * np.arange(self.bins) / (self.bins - 1)
        points[-1] = high
        # Records up to each point: n_1 = #{x <= x_1}, n_j = #{x_{j-1} < x <= x_j}.
        counts = np.diff(np.searchsorted(ordered, points, side="right"), prepend=0)
        counts[counts == 0] = 1
        return points, np.cumsum(counts) / counts.sum()

    def draw_sorted(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """len(values) draws from the distribution, in ascending order."""
        return self._draw_sorted(np.sort(values), rng)

    def _draw_sorted(self, ordered: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        points, cdf = self._distribution(ordered)
        # Sorted uniforms without sorting: partial sums of n+1 exponentials over their total are distributed as the
        # order statistics of n uniforms.  F^-1 is monotone, so its images are the sorted draws.
        spacings = rng.standard_exponential(len(ordered) + 1)
        sums = np.cumsum(spacings)
        uniforms = sums[:-1] / sums[-1]
        # np.interp returns x_1 below F(x_1): the probability mass F(x_1) at the minimum.
        return np.interp(uniforms, cdf, points)

    def perturb(self, values, rng, categories=None):
        order = stable_argsort(values)
        return reassociate_by_rank(values, self._draw_sorted(values[order], rng), order)


def reassociate_by_rank(original: np.ndarray, new_values: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """The new value of rank r in the place of the original value of rank r; tied originals take their ranks in the
    order they come (the records' random order).  ``order``: the original's stable argsort, when already known."""
    if len(original) != len(new_values):
        raise AnonymizationError(f"{len(new_values)} new values for {len(original)} records")
    placed = np.empty(len(original), dtype=float)
    placed[stable_argsort(original) if order is None else order] = np.sort(new_values)
    return placed


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` (ties in position order), faster where it can be: whole numbers spanning
    fewer than 65,536 values by NumPy's radix sort on small integers; values without ties by the unstable (quicker)
    sort, whose order is then the only one."""
    values = np.asarray(values)
    low, high = values.min(), values.max()
    if high - low < 2**16 and np.array_equal(values, np.trunc(values)):
        return np.argsort((values - low).astype(np.uint8 if high - low < 2**8 else np.uint16), kind="stable")
    order = np.argsort(values)
    ordered = values[order]
    if np.any(ordered[1:] == ordered[:-1]):
        return np.argsort(values, kind="stable")
    return order


NOISE_DISTRIBUTIONS = ("gaussian", "uniform")


@dataclass(frozen=True)
class AdditiveNoise(Perturbation):
    """Y = X + r with r uniform or Gaussian, zero mean, Var(r) = Var(X) / snr (population variance of X)."""

    distribution: str
    snr: float
    name = "additive-noise"

    def __post_init__(self):
        if self.distribution not in NOISE_DISTRIBUTIONS:
            raise PolicyError(f"noise distribution must be one of {NOISE_DISTRIBUTIONS}, got {self.distribution!r}")
        object.__setattr__(self, "snr", checked_number(self.snr, "snr", self.name, low=0, low_open=True,
                                                       note="the signal-to-noise ratio Var(X)/Var(noise)"))

    def describe(self) -> dict:
        return {"method": self.name, "distribution": self.distribution, "snr": float(self.snr)}

    def noise_variance(self, values):
        return float(np.var(values)) / float(self.snr)

    def perturb(self, values, rng, categories=None):
        deviation = math.sqrt(self.noise_variance(values))
        if deviation == 0:
            raise AnonymizationError("a constant attribute has no variance to set the noise by")
        if self.distribution == "gaussian":
            return values + rng.normal(0.0, deviation, len(values))
        half_width = deviation * math.sqrt(3.0)  # U(-a, a) has variance a²/3
        return values + rng.uniform(-half_width, half_width, len(values))


@dataclass(frozen=True)
class RandomizedResponse(Perturbation):
    """Keep each category with probability ``keep``; otherwise release one of the other categories, uniformly."""

    keep: float
    name = "randomized-response"
    numeric = False
    categorical = True

    def __post_init__(self):
        object.__setattr__(self, "keep", checked_number(
            self.keep, "keep", self.name, low=0, high=1, high_open=True,
            note="the probability of keeping a category; 1 would publish the originals"))

    def describe(self) -> dict:
        return {"method": self.name, "keep": float(self.keep)}

    def perturb(self, values, rng, categories=None):
        if categories is None or len(categories) < 2:
            raise AnonymizationError("randomized response needs at least two categories")
        kept = rng.random(len(values)) < self.keep
        shift = rng.integers(1, len(categories), len(values))
        return np.where(kept, values, (values + shift) % len(categories))


@dataclass(frozen=True)
class Pram(Perturbation):
    """PRAM, the post-randomization method as sdcMicro's ``pram`` applies it: each record's category i is replaced by
    a draw from row i of a transition matrix (the probabilities of releasing each category in its place).

    Without ``matrix``, the matrix is sdcMicro's invariant one, built from the attribute's own category shares p:
    P keeps category i with a probability drawn uniformly from [``keep``, 1] and moves it to each other category
    alike; its Bayesian inverse Q (Q[k, j] = P[j, k] p[j] / Σ_i p[i] P[i, k]) gives R = P Q, for which p R = p; the
    matrix is ``alpha`` R + (1 − ``alpha``) I, invariant too, so the released categories keep the shares in
    expectation.  ``matrix`` gives the transition matrix instead: a mapping of each category to its row (a mapping of
    categories to probabilities; a pandas DataFrame's rows do), every row summing to 1; with ``invariant`` it must
    also keep the data's shares (p M = p), or nothing is released."""

    keep: float = 0.8
    alpha: float = 0.5
    matrix: Mapping[object, Mapping[object, float]] | None = None
    invariant: bool = False
    name = "pram"
    numeric = False
    categorical = True

    def __post_init__(self):
        object.__setattr__(self, "keep", checked_number(self.keep, "keep", self.name, low=0, high=1,
                                                        note="the least probability of keeping a category"))
        object.__setattr__(self, "alpha", checked_number(self.alpha, "alpha", self.name, low=0, high=1))
        if self.matrix is not None:
            object.__setattr__(self, "matrix", _transition_rows(self.matrix))

    def describe(self) -> dict:
        """The parameters; the matrix itself, given or built, is what :meth:`drawn` records."""
        if self.matrix is None:
            return {"method": self.name, "keep": float(self.keep), "alpha": float(self.alpha)}
        return {"method": self.name, "matrix": "given", "invariant": self.invariant}

    def transition_matrix(self, values: np.ndarray, rng: np.random.Generator, categories: Sequence) -> np.ndarray:
        """The matrix the release draws from, in the categories' code order (``values`` are their codes)."""
        shares = np.bincount(values, minlength=len(categories)) / len(values)
        if self.matrix is not None:
            return self._given(categories, shares)
        count = len(categories)
        kept = rng.uniform(self.keep, 1, count)
        p = np.repeat(((1 - kept) / (count - 1))[:, None], count, axis=1)
        np.fill_diagonal(p, kept)
        arriving = shares @ p  # Σ_i p_i P[i, k]
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(arriving[:, None] > 0, (p * shares[:, None]).T / arriving[:, None], 0.0)
        return self.alpha * (p @ q) + (1 - self.alpha) * np.eye(count)

    def _given(self, categories: Sequence, shares: np.ndarray) -> np.ndarray:
        """The given matrix in the categories' code order (rows and columns matched by their text)."""
        texts = [str(c) for c in categories]
        missing, extra = [t for t in texts if t not in self.matrix], [t for t in self.matrix if t not in texts]
        if missing or extra:
            raise PolicyError("pram: the transition matrix's categories must be the attribute's: "
                              + (f"it lacks {missing}" if missing else f"it has {extra}, which the data does not"))
        matrix = np.array([[self.matrix[i].get(j, 0.0) for j in texts] for i in texts], dtype=float)
        if self.invariant:
            drift = np.abs(shares @ matrix - shares)
            worst = int(np.argmax(drift))
            if drift[worst] > 1e-9:
                raise PolicyError(f"pram: the transition matrix is not invariant for the data's category shares: "
                                  f"category {categories[worst]!r} would hold {float((shares @ matrix)[worst]):.6g} "
                                  f"of the records instead of {float(shares[worst]):.6g}")
        return matrix

    def perturb(self, values, rng, categories=None):
        return self.drawn(values, rng, categories)[0]

    def drawn(self, values, rng, categories=None):
        """The released codes and the matrix they were drawn from (rows and columns by the categories' text), which
        analysts correct their estimates by."""
        if categories is None or len(categories) < 2:
            raise AnonymizationError("pram needs at least two categories")
        matrix = self.transition_matrix(values, rng, categories)
        released = np.empty_like(values)
        for category in range(len(categories)):
            chosen = values == category
            if chosen.any():
                released[chosen] = rng.choice(len(categories), int(chosen.sum()), p=matrix[category])
        texts = [str(c) for c in categories]
        return released, {"transition_matrix": {row: dict(zip(texts, map(float, probabilities)))
                                                for row, probabilities in zip(texts, matrix)}}


def _transition_rows(matrix: Mapping) -> dict[str, dict[str, float]]:
    """A transition matrix given as rows of probabilities, checked alone (every row's probabilities in [0, 1],
    summing to 1, over the same categories as the rows), keyed by the categories' text."""
    rows = matrix.to_dict(orient="index") if isinstance(matrix, pd.DataFrame) else matrix
    if not isinstance(rows, Mapping) or not rows:
        raise PolicyError("pram: the transition matrix must map each category to its row of probabilities")
    labels = {str(label) for label in rows}
    checked = {}
    for label, row in rows.items():
        label = str(label)
        if not isinstance(row, Mapping):
            raise PolicyError(f"pram: the transition matrix's row {label!r} must map categories to probabilities")
        outside = [str(c) for c in row if str(c) not in labels]
        if outside:
            raise PolicyError(f"pram: the transition matrix's row {label!r} names {outside}, which are no rows")
        numbers = {str(c): float(checked_number(p, f"row {label!r}, column {str(c)!r}", "pram", low=0, high=1))
                   for c, p in row.items()}
        total = sum(numbers.values())
        if abs(total - 1) > 1e-9:
            raise PolicyError(f"pram: the transition matrix's row {label!r} sums to {total:.12g}, not 1")
        checked[label] = numbers
    return checked


# ==================================================================== the release
@dataclass
class PerturbedRelease(Reportable):
    """What :func:`perturb` wrote: the file, the table, its records, each private attribute's method, the measures."""

    path: Path
    table: str
    records: int
    methods: dict[str, dict]
    disclosure: DisclosureReport | None
    origin: tuple | None = field(default=None, repr=False, compare=False)  # set by the façade, see Reportable

    def summary(self) -> str:
        perturbed = ", ".join(f"{c} ({m['method']})" for c, m in self.methods.items())
        text = f"released {self.records} records to {self.path} (table {self.table!r}); perturbed {perturbed}"
        return text + ("\n" + self.disclosure.summary() if self.disclosure is not None else "")


@dataclass(frozen=True)
class _Attribute:
    column: str
    position: int
    method: Perturbation
    categorical: bool
    categories: list | None = None  # categorical attributes: the values in code order (None: sorted, until coded)
    codes: exp.Table | None = None  # categorical attributes: a temporary table (value, code)


def perturb(engine: Engine, source: exp.Expression, path: str | os.PathLike, *,
            method: Perturbation, numeric: Sequence[str] = (),
            categorical: Sequence[str] | Mapping[str, Sequence | None] = (),
            categorical_method: Perturbation | None = None, identifiers: Sequence[str] = (),
            insensitive: Sequence[str] = (), others: str = "error", keep: Sequence[str] | None = None,
            seed: int | None = None, table: str = "release", measure: bool = True,
            known_records: Sequence[int] = (10, 100), mi_bins: int | None = None,
            measure_records: int | None = disclosure.SAMPLE,
            progress: Callable[[str], None] | None = None, format: str | None = None,
            signer: Signer | None = None) -> PerturbedRelease:
    """Publish ``source`` (a sqlglot table or query) to ``path`` (DuckDB, Parquet or CSV by its extension or
    ``format``) with its private attributes perturbed.

    ``numeric`` attributes are perturbed by ``method``; ``categorical`` ones (a list, or a mapping to the categories in
    code order, None for sorted) by ``categorical_method``, which defaults to ``method`` when it can encode categories
    (:class:`EmpiricalSynthesis`).  Every other column needs a role too, as in a :class:`~duckanon.declare.policy.Policy`:
    ``identifiers`` are dropped, ``insensitive`` columns released unchanged (staying with their records), and
    ``others`` says what becomes of the columns named nowhere: ``"error"`` (the default: a column nobody classified,
    such as a name, would otherwise be published), ``"drop"`` or ``"insensitive"``.  ``keep`` is the short form of
    "release these unchanged and drop the rest": ``keep=[...]`` is ``insensitive=[...], others="drop"``, and cannot be
    combined with either.  A column named in two roles, or one the source lacks, is an error.  ``seed`` makes the
    release reproducible (default: fresh entropy); it is not written to the release.  With ``measure`` the release is
    measured (:func:`duckanon.privacy.disclosure.disclosure_report`, which ``known_records``, ``mi_bins`` and
    ``measure_records``, its ``sample``, go to).

    Raises PolicyError for bad parameters and AnonymizationError for bad data — a missing, constant, NULL-holding or
    non-numeric column marked numeric, or an empty source; nothing is written then.
    """
    say = progress or (lambda message: None)
    if not isinstance(method, Perturbation):
        raise PolicyError(f"method must be a Perturbation (EmpiricalSynthesis, AdditiveNoise, RandomizedResponse), "
                          f"got {method!r}")
    if not isinstance(table, str) or not table:
        raise PolicyError(f"the release table needs a name, got {table!r}")
    seed = _checked_seed(seed)
    release_format(path, format)
    if measure:
        disclosure.check_parameters(known_records, mi_bins, measure_records)
    columns, types = _schema(engine, source)
    orders = _orders(categorical)
    released = _released_columns(columns, numeric, orders, identifiers, insensitive, others, keep)
    attributes = _attributes(columns, types, method, list(numeric), orders, categorical_method)

    temporaries: list[exp.Table] = []
    views: list[str] = []
    try:
        say("keying the source's records (a copy with two seeded hashes of each record)")
        work = sb.table(f"__duckanon_perturb_{next(_names)}")
        engine.run(sb.create_table_as(work, keyed_query(source, columns, seed), temporary=True))
        temporaries.append(work)
        private = [a.column for a in attributes]
        facts = _facts(engine, work, private, [a.column for a in attributes if not a.categorical],
                       [c for c in released if c not in private])
        records = facts["records"]
        if records < 2:
            raise AnonymizationError(f"the source has {records} record(s): perturbation needs at least two")
        nulls = {a.column: records - facts[f"nonnull:{a.column}"] for a in attributes
                 if facts[f"nonnull:{a.column}"] < records}
        if nulls:
            raise AnonymizationError("private attributes must not hold NULL (impute or drop those records first): "
                                     + ", ".join(f"{c!r} has {n} NULL" for c, n in nulls.items()))
        attributes = [_with_codes(engine, work, a, temporaries) for a in attributes]

        say(f"reading {len(attributes)} private attribute(s) of {records} records")
        keys, original = _fetch(engine, work, attributes)
        # The first hash alone identifies the records unless some share it (identical records, or a collision).
        join_keys = KEYS[:1] if _unique(keys[KEYS[0]]) else KEYS
        _check_values(attributes, original)

        say("perturbing")
        perturbed, draws = _perturb_all(attributes, original, np.random.SeedSequence(seed).spawn(len(columns)))
        methods = {a.column: {**_description(a), **draws[a.column]} for a in attributes}

        report = None
        if measure:
            say("measuring disclosure")
            report = disclosure_report(
                original, perturbed, methods={c: m["method"] for c, m in methods.items()},
                noise_variance={a.column: a.method.noise_variance(original[a.column]) for a in attributes},
                nominal={a.column for a in attributes if not a.method.numeric}, known_records=known_records,
                mi_bins=mi_bins, sample=measure_records, seed=seed)
        del original  # only the new values go on

        view = f"__duckanon_perturbed_{next(_names)}"
        frame = pd.DataFrame({**{key: keys[key] for key in join_keys}, ORDER: np.arange(records, dtype=np.int64),
                              **{_new(a): perturbed[a.column] for a in attributes}}, copy=False)
        engine.register(view, frame)
        views.append(view)
        distinct = len(join_keys) == 2 and not _unique(keys[KEYS[0]], keys[KEYS[1]])
        query = release_query(work, sb.table(view), released, attributes, join_keys, distinct)
        info = ReleaseInfo(kind="perturbation", source_records=records, transformation={"perturbation": methods},
                           metrics={"disclosure": report.as_dict()} if report is not None else {})
        say(f"writing and verifying {path}")
        written = write_release(engine, path, ReleaseContent(table, query, {}, info, sources=[source]), format=format,
                                verify=lambda reader: verify_perturbed_release(reader, table, released, attributes, facts),
                                signer=signer)
        return PerturbedRelease(written, table, records, methods, report)
    finally:
        for view in views:
            engine.unregister(view)
        for temporary in reversed(temporaries):
            engine.run(sb.drop("TABLE", temporary))


# ------------------------------------------------------------------------ parameters
def _checked_seed(seed: int | None) -> int:
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    return checked_number(seed, "seed", "perturb", whole=True, low=0, note="or None for fresh entropy")


def _schema(engine: Engine, source: exp.Expression) -> tuple[list[str], dict[str, str]]:
    try:
        types = engine.types(source)
    except duckdb.Error as error:
        raise AnonymizationError(f"cannot read the source {sb.to_sql(source)}: {error}") from error
    clashing = [c for c in (*KEYS, ORDER) if c in types]
    if clashing:
        raise PolicyError(f"the source has columns named {clashing}, which perturbation uses for its own keys")
    return list(types), types


def _orders(categorical: Sequence[str] | Mapping[str, Sequence | None]) -> dict[str, Sequence | None]:
    """The categorical attributes and their categories in code order (None: sorted)."""
    if isinstance(categorical, str):
        raise PolicyError(f"categorical takes a list of column names, not the single string {categorical!r}")
    return dict(categorical) if isinstance(categorical, Mapping) else {c: None for c in categorical}


def _released_columns(columns: list[str], numeric: Sequence[str], orders: Mapping[str, object],
                      identifiers: Sequence[str], insensitive: Sequence[str], others: str,
                      keep: Sequence[str] | None) -> list[str]:
    """The released columns in source order, every column of the source given a role (:mod:`duckanon.declare.roles`)."""
    if keep is not None:
        if insensitive or others != "error":
            raise PolicyError("keep lists the columns released unchanged and drops every other one (it is "
                              "insensitive=..., others='drop'); give keep, or insensitive and others, not both")
        insensitive, others = keep, "drop"
    check_others(others)
    assigned = assign_roles((("identifier", identifiers), ("numeric", numeric), ("categorical", list(orders)),
                             ("insensitive", insensitive)))
    return released_columns(assigned, columns, others, owner="the perturbation",
                            role_names="identifiers, numeric, categorical, insensitive")


def _attributes(columns: list[str], types: dict[str, str], method: Perturbation, numeric: list[str],
                orders: Mapping[str, Sequence | None], categorical_method: Perturbation | None) -> list[_Attribute]:
    if not numeric and not orders:
        raise PolicyError("name at least one private attribute to perturb (numeric=[...] or categorical=[...])")
    if not method.numeric and numeric:
        raise PolicyError(f"{type(method).__name__} perturbs categories, not the numeric attributes {numeric}; "
                          f"pass it as categorical_method")
    if orders:
        categorical_method = categorical_method or (method if method.categorical else None)
        if categorical_method is None or not isinstance(categorical_method, Perturbation) \
                or not categorical_method.categorical:
            raise PolicyError(f"{type(method).__name__} does not perturb categories: give categorical_method="
                              f"RandomizedResponse(...) or EmpiricalSynthesis(...) for {list(orders)}")
    not_numbers = {c: types[c] for c in numeric if not sb.is_numeric_type(types[c])}
    if not_numbers:
        raise AnonymizationError("columns marked numeric are not numbers: " + ", ".join(
            f"{c!r} is {t}" for c, t in not_numbers.items()) + " (mark categories as categorical)")
    result = [_Attribute(c, columns.index(c), method, categorical=False) for c in numeric]
    for column, order in orders.items():
        if order is not None:
            order = list(order)
            if len(set(order)) != len(order) or any(v is None for v in order):
                raise PolicyError(f"the categories of {column!r} must be distinct and not None, got {order}")
        result.append(_Attribute(column, columns.index(column), categorical_method, True, order))
    return sorted(result, key=lambda a: a.position)


def _description(attribute: _Attribute) -> dict:
    described = attribute.method.describe()
    if attribute.categories is not None:
        described["categories"] = [c if isinstance(c, (bool, int, float, str)) else str(c)
                                   for c in attribute.categories]
    return described


def _new(attribute: _Attribute) -> str:
    return f"__duckanon_new_{attribute.position}"


def _code(attribute: _Attribute) -> str:
    return f"__duckanon_code_{attribute.position}"


# ------------------------------------------------------------------------------ SQL
def _hash(salt: int, columns: Sequence[str]) -> exp.Expression:
    return exp.func("HASH", sb.lit(salt), *[sb.col(c) for c in columns])


def keyed_query(source: exp.Expression, columns: Sequence[str], seed: int) -> exp.Select:
    """The source with every record's key: two seeded hashes of all its columns (only records identical in every
    column share a key)."""
    salts = np.random.SeedSequence(seed).generate_state(2, np.uint64) >> np.uint64(1)  # 63-bit literals
    relation = source.subquery("source") if isinstance(source, exp.Query) else source
    return exp.select(exp.Star(), *[exp.alias_(_hash(int(salt), columns), key, quoted=True)
                                    for salt, key in zip(salts, KEYS)]).from_(relation)


def _fingerprint(*expressions: exp.Expression) -> exp.Expression:
    """An order-independent checksum of a column (or of several together): the sum of the values' hashes."""
    return exp.func("SUM", exp.cast(exp.func("HASH", *expressions), exp.DataType.build("DECIMAL(38, 0)")))


def facts_query(relation: exp.Expression, counted: Sequence[str], numbers: Sequence[str],
                kept: Sequence[str]) -> exp.Select:
    """One pass over the source or the release: the records; non-NULL values of each ``counted`` column; fingerprint,
    minimum and maximum of each of ``numbers`` (as DOUBLE); fingerprints of each ``kept`` column and of all of them
    together (so the release can be checked to carry them over unchanged and still together in their records)."""
    selections = [exp.func("COUNT", exp.Star()).as_("records")]
    for column in counted:
        selections.append(exp.func("COUNT", sb.col(column)).as_(f"nonnull:{column}", quoted=True))
    for column in numbers:
        value = sb.as_double(sb.col(column))
        selections += [_fingerprint(value).as_(f"fingerprint:{column}", quoted=True),
                       exp.func("MIN", value).as_(f"min:{column}", quoted=True),
                       exp.func("MAX", value).as_(f"max:{column}", quoted=True)]
    for column in kept:
        selections.append(_fingerprint(sb.col(column)).as_(f"fingerprint:{column}", quoted=True))
    if kept:
        selections.append(_fingerprint(*[sb.col(c) for c in kept]).as_(KEPT, quoted=True))
    return exp.select(*selections).from_(relation)


def _facts(engine, relation: exp.Expression, counted, numbers, kept) -> dict:
    query = facts_query(relation, counted, numbers, kept)
    return dict(zip(engine.columns(query), engine.rows(query)[0]))


def _with_codes(engine, work: exp.Table, attribute: _Attribute, temporaries: list) -> _Attribute:
    """A categorical attribute with a temporary table of its codes (value, code): the given order, or the sorted
    distinct values; every value of the data must have a code."""
    if not attribute.categorical:
        return attribute
    codes = sb.table(f"__duckanon_codes_{next(_names)}")
    value = sb.col(attribute.column)
    if attribute.categories is None:
        distinct = exp.select(value.as_(VALUE)).distinct().from_(work)
        rank = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=sb.col(VALUE))]))
        query = exp.select(sb.col(VALUE), exp.Sub(this=rank, expression=sb.lit(1)).as_(CODE)).from_(
            distinct.subquery("d"))
    else:
        kind = exp.DataType.build(_sql_type(engine, work, attribute.column), dialect="duckdb")
        rows = [exp.Tuple(expressions=[exp.cast(sb.lit(v), kind), sb.lit(i)])
                for i, v in enumerate(attribute.categories)]
        query = exp.select(sb.col(VALUE), sb.col(CODE)).from_(
            exp.Values(expressions=rows, alias=exp.TableAlias(this=sb.ident("v"), columns=[
                sb.ident(VALUE), sb.ident(CODE)])))
    try:
        engine.run(sb.create_table_as(codes, query, temporary=True))
    except duckdb.ConversionException as error:
        raise PolicyError(f"the categories given for {attribute.column!r} do not fit its type: {error}") from error
    temporaries.append(codes)
    uncoded = engine.rows(exp.select(value).distinct().from_(exp.alias_(work, "w", quoted=True)).where(
        exp.Not(this=exp.Exists(this=exp.select(sb.lit(1)).from_(exp.alias_(codes, "c", quoted=True)).where(
            sb.col(VALUE, "c").eq(sb.col(attribute.column, "w")))))).limit(10))
    if uncoded:
        raise PolicyError(f"{attribute.column!r} holds values missing from its categories: "
                          f"{[row[0] for row in uncoded]}")
    categories = [row[0] for row in engine.rows(exp.select(sb.col(VALUE)).from_(codes).order_by(sb.col(CODE)))]
    return _Attribute(attribute.column, attribute.position, attribute.method, True, categories, codes)


def _sql_type(engine, relation: exp.Table, column: str) -> str:
    return engine.types(relation)[column]


def _fetch(engine, work: exp.Table, attributes: list[_Attribute]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The records' keys and private attributes (numbers as DOUBLE, categories as codes) as NumPy arrays, in the
    random order of the keys."""
    query = exp.select(*[sb.col(key, "w") for key in KEYS]).from_(exp.alias_(work, "w", quoted=True))
    for attribute in attributes:
        if not attribute.categorical:
            query = query.select(sb.as_double(sb.col(attribute.column, "w")).as_(_code(attribute), quoted=True))
        else:
            alias = f"c{attribute.position}"
            query = query.join(exp.alias_(attribute.codes, alias, quoted=True),
                               on=sb.col(VALUE, alias).eq(sb.col(attribute.column, "w"))).select(
                sb.col(CODE, alias).as_(_code(attribute), quoted=True))
    fetched = engine.arrays(query)
    keys = {key: np.asarray(fetched[key]) for key in KEYS}
    # Distinct first keys order the records uniquely; only when some are equal (identical records, or a 64-bit
    # collision) does the second key matter.
    order = np.argsort(keys[KEYS[0]])
    if not _unique(keys[KEYS[0]][order]):
        order = np.lexsort([keys[key] for key in reversed(KEYS)])
    values = {a.column: np.asarray(fetched[_code(a)], dtype=np.int64 if a.categorical else float)[order]
              for a in attributes}
    return {key: column[order] for key, column in keys.items()}, values


def _unique(*ordered: np.ndarray) -> bool:
    """Whether no two neighbours of sorted key columns are equal in all of them."""
    equal = np.ones(len(ordered[0]) - 1, dtype=bool)
    for column in ordered:
        equal &= column[1:] == column[:-1]
    return not equal.any()


def _perturb_all(attributes: list[_Attribute], original: Mapping[str, np.ndarray],
                 seeds: Sequence[np.random.SeedSequence]) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """Each attribute's new values and what its release records of the draw (:meth:`Perturbation.drawn`),
    attributes in parallel threads (NumPy's sorts and draws release the GIL), each with its own random stream (by the
    column's position in the source)."""
    def one(attribute: _Attribute) -> tuple[np.ndarray, dict]:
        return attribute.method.drawn(original[attribute.column], np.random.default_rng(seeds[attribute.position]),
                                      attribute.categories)

    with ThreadPoolExecutor(max_workers=max(1, min(len(attributes), os.cpu_count() or 1))) as pool:
        drawn = dict(zip([a.column for a in attributes], pool.map(one, attributes)))
    return {c: values for c, (values, _) in drawn.items()}, {c: extra for c, (_, extra) in drawn.items()}


def _check_values(attributes: list[_Attribute], values: Mapping[str, np.ndarray]) -> None:
    for attribute in attributes:
        column = values[attribute.column]
        if not attribute.categorical and not np.all(np.isfinite(column)):
            raise AnonymizationError(f"{attribute.column!r} holds {int(np.sum(~np.isfinite(column)))} infinite or "
                                     f"NaN value(s)")
        if column.min() == column.max():
            shown = attribute.categories[int(column[0])] if attribute.categorical else float(column[0])
            raise AnonymizationError(f"{attribute.column!r} is constant (every record holds {shown!r}): there is "
                                     f"nothing to perturb, and its one value would be published as it is")


def release_query(work: exp.Table, perturbed: exp.Table, released: Sequence[str], attributes: Sequence[_Attribute],
                  keys: Sequence[str] = KEYS, distinct: bool = False) -> exp.Select:
    """The released table: kept columns from the keyed source, private ones from the perturbed values (categories
    decoded through their code tables), joined by ``keys``, in the perturbed values' order.  With ``distinct`` (records
    identical in every column) each distinct record joins its key's new rows once."""
    by_column = {a.column: a for a in attributes}
    records = exp.select(exp.Star()).distinct().from_(work).subquery(sb.ident("w"), copy=False) if distinct \
        else exp.alias_(work, "w", quoted=True)
    query = exp.select().from_(records).join(exp.alias_(perturbed, "p", quoted=True), on=sb.and_all(
        sb.col(key, "w").eq(sb.col(key, "p")) for key in keys))
    for column in released:
        attribute = by_column.get(column)
        if attribute is None:
            query = query.select(sb.col(column, "w"))
        elif attribute.method.numeric:
            query = query.select(sb.col(_new(attribute), "p").as_(column, quoted=True))
        else:
            alias = f"c{attribute.position}"
            query = query.join(exp.alias_(attribute.codes, alias, quoted=True),
                               on=sb.col(CODE, alias).eq(sb.col(_new(attribute), "p"))).select(
                sb.col(VALUE, alias).as_(column, quoted=True))
    return query.order_by(sb.col(ORDER, "p"))


def verify_perturbed_release(reader: Engine, table: str, released: Sequence[str],
                             attributes: Sequence[_Attribute], source: Mapping[str, object]) -> None:
    """Re-check the written file on its own, against the source's facts: its columns and records; kept columns
    carried over unchanged and together; private columns without NULL; numeric ones DOUBLE and not the original values
    (fingerprints differ), synthesized ones inside the original range (codes inside 0..categories-1); randomized
    categories only from their domain."""
    relation = sb.table(table)
    columns = reader.columns(relation)
    if columns != list(released):
        raise ReleaseCheckFailed(f"release check: columns {columns} differ from the expected {list(released)}")
    types = reader.types(relation)
    private = {a.column: a for a in attributes}
    kept = [c for c in released if c not in private]
    found = _facts(reader, relation, list(private), [a.column for a in attributes if a.method.numeric], kept)
    if found["records"] != source["records"]:
        raise ReleaseCheckFailed(f"release check: {found['records']} records written, {source['records']} expected")
    differing = [c for c in kept if found[f"fingerprint:{c}"] != source[f"fingerprint:{c}"]]
    if differing or (kept and found[KEPT] != source[KEPT]):
        raise ReleaseCheckFailed(f"release check: the kept columns {differing or kept} differ from the source's")
    for column, attribute in private.items():
        if found[f"nonnull:{column}"] != source["records"]:
            raise ReleaseCheckFailed(f"release check: {column!r} has NULL values")
        if not attribute.method.numeric:
            shown = {row[0] for row in reader.rows(exp.select(sb.col(column)).distinct().from_(relation))}
            foreign = shown - set(attribute.categories)
            if foreign:
                raise ReleaseCheckFailed(f"release check: {column!r} shows values outside its categories: "
                                         f"{sorted(foreign, key=str)[:10]}")
            continue
        if types[column] != "DOUBLE":
            raise ReleaseCheckFailed(f"release check: {column!r} is {types[column]}, not DOUBLE")
        low, high = found[f"min:{column}"], found[f"max:{column}"]
        if attribute.categorical:
            bounds = (0, len(attribute.categories) - 1)
        else:
            if found[f"fingerprint:{column}"] == source[f"fingerprint:{column}"]:
                raise ReleaseCheckFailed(f"release check: {column!r} holds exactly the original values")
            bounds = (source[f"min:{column}"], source[f"max:{column}"])
        if attribute.method.bounded and not bounds[0] <= low <= high <= bounds[1]:
            raise ReleaseCheckFailed(f"release check: {column!r} spans [{low}, {high}], outside the original "
                                     f"[{bounds[0]}, {bounds[1]}]")
