"""Every numeric parameter of every privacy model, clustering method and perturbation method accepts exactly the finite
numbers in its range and refuses anything else -- NaN, ±inf, bools, text, out-of-range values -- at construction, with a
PolicyError naming the model or method, the parameter and the value (issue 12: a NaN l was accepted and surfaced as a
DuckDB binder error about a column called "nan")."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import (
    AdditiveNoise,
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    DistinctLDiversity,
    EmpiricalSynthesis,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Personalization,
    PolicyError,
    PSensitiveKAnonymity,
    RandomizedResponse,
    RecursiveCLDiversity,
    TCloseness,
    TopDownPartitioning,
)

BIG = 10**1000  # a valid k that any drawn p or l stays below
TREE = Hierarchy.from_mapping({"x": ["*"], "y": ["*"]})


@dataclass(frozen=True)
class Parameter:
    owner: str  # the name the error must give
    name: str
    make: Callable[[object], object]
    whole: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value) -> bool:
        """The rule, stated independently of the library: a finite number (an integer type when whole), no bool."""
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.whole:
            if not isinstance(value, (int, np.integer)):
                return False
        elif not isinstance(value, (int, float, np.integer, np.floating)) \
                or (isinstance(value, int) and abs(value) > sys.float_info.max) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True


PARAMETERS = [
    Parameter("k-anonymity", "k", lambda v: KAnonymity(v), whole=True, low=1),
    Parameter("distinct-l-diversity", "l", lambda v: DistinctLDiversity("s", v), whole=True, low=1),
    Parameter("entropy-l-diversity", "l", lambda v: EntropyLDiversity("s", v), low=1),
    Parameter("recursive-cl-diversity", "c", lambda v: RecursiveCLDiversity("s", v, 2), low=0, low_open=True),
    Parameter("recursive-cl-diversity", "l", lambda v: RecursiveCLDiversity("s", 1.5, v), whole=True, low=2),
    Parameter("alpha-k-anonymity", "alpha", lambda v: AlphaKAnonymity("s", v, 5), low=0, high=1, low_open=True),
    Parameter("alpha-k-anonymity", "k", lambda v: AlphaKAnonymity("s", 0.5, v), whole=True, low=1),
    Parameter("p-sensitive-k-anonymity", "p", lambda v: PSensitiveKAnonymity("s", v, BIG), whole=True, low=1),
    Parameter("p-sensitive-k-anonymity", "k", lambda v: PSensitiveKAnonymity("s", 1, v), whole=True, low=1),
    Parameter("t-closeness", "t", lambda v: TCloseness("s", v), low=0, high=1),
    Parameter("alpha-l-diversity-k-anonymity", "alpha",
              lambda v: AlphaLDiversityKAnonymity("s", v, 1, 5, {"x": 1}), low=0, high=1, low_open=True),
    Parameter("alpha-l-diversity-k-anonymity", "l",
              lambda v: AlphaLDiversityKAnonymity("s", 0.5, v, BIG, {"x": 1}), whole=True, low=1),
    Parameter("alpha-l-diversity-k-anonymity", "k",
              lambda v: AlphaLDiversityKAnonymity("s", 0.5, 1, v, {"x": 1}), whole=True, low=1),
    Parameter("alpha-l-diversity-k-anonymity", "the level of 'x'",
              lambda v: AlphaLDiversityKAnonymity("s", 0.5, 1, 5, {"x": v}), whole=True, low=1),
    Parameter("personalization", "the sensitivity level of 'x'", lambda v: Personalization("ppl", TREE, {"x": v}),
              whole=True, low=1),
    Parameter("top-down partitioning", "seed", lambda v: TopDownPartitioning(seed=v), whole=True, low=0),
    Parameter("empirical-synthesis", "bins", lambda v: EmpiricalSynthesis(v), whole=True, low=2),
    Parameter("additive-noise", "snr", lambda v: AdditiveNoise("gaussian", v), low=0, low_open=True),
    Parameter("randomized-response", "keep", lambda v: RandomizedResponse(v), low=0, high=1, high_open=True),
]

VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, True, False, 0, 1, 2, -1, 0.0, 1.0, 2.0, 0.5, -0.0, 1e-300,
                     np.float64("nan"), np.float64("inf"), np.int64(3), np.float32(0.5), 10**400, None, "2"]),
    st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.floats(-3, 3))


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: f"{p.owner}.{p.name}")
@settings(max_examples=40, deadline=None)
@given(value=VALUES)
def test_numeric_parameters_accept_exactly_finite_numbers_in_range(parameter, value):
    if parameter.accepts(value):
        parameter.make(value)
        return
    with pytest.raises(PolicyError) as raised:
        parameter.make(value)
    message = str(raised.value)
    assert message.startswith(f"{parameter.owner}: {parameter.name} must "), message
    assert f"got {value!r}" in message, message


def test_nan_entropy_l_is_refused_before_any_sql(con):
    """The issue's case: EntropyLDiversity('salary-class', nan) was accepted; it is refused when built."""
    with pytest.raises(PolicyError, match="entropy-l-diversity: l must be a number of at least 1, got nan"):
        EntropyLDiversity("salary-class", float("nan"))
    with pytest.raises(PolicyError, match="recursive-cl-diversity: c must be a positive number, got inf"):
        RecursiveCLDiversity("salary-class", float("inf"), 2)


def test_perturbation_seed_is_checked(con, tmp_path):
    con.execute("CREATE TABLE t AS SELECT range::DOUBLE AS x FROM range(10)")
    with pytest.raises(PolicyError, match=r"perturb: seed must be a whole number of at least 0, got nan"):
        duckanon.connect(con).perturb("t", tmp_path / "r.duckdb", method=EmpiricalSynthesis(3), numeric=["x"],
                                      seed=float("nan"))
    assert list(tmp_path.iterdir()) == []


def test_valid_values_are_stored_as_plain_numbers():
    assert KAnonymity(np.int64(5)).k == 5 and type(KAnonymity(np.int64(5)).k) is int
    assert EntropyLDiversity("s", 2).l == 2 and type(EntropyLDiversity("s", 2).l) is int
    assert type(AdditiveNoise("uniform", np.float32(2.5)).snr) is float
    assert EmpiricalSynthesis(np.int64(4)).describe() == {"method": "empirical-synthesis", "bins": 4}
