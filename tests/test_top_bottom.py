"""Top and bottom coding as a hierarchy (``Hierarchy.top_bottom``, the CLI builder, ``anon_hierarchy_top_bottom`` in
``test_sql_first.py``): its rows written out from the definition, a release coded by it verified with its typed
bounds recomputed by pandas, and bad codes refused by name."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import Hierarchy, KAnonymity, Policy
from duckanon.cli import main
from duckanon.errors import HierarchyError


@given(values=st.lists(st.integers(0, 120), min_size=1, max_size=60), bottom=st.one_of(st.none(), st.integers(0, 60)),
       span=st.integers(1, 60), coded_top=st.booleans(), widths=st.sampled_from([None, [5], [5, 10], [10, 20, 40]]))
@settings(max_examples=80, deadline=None)
def test_each_value_is_kept_or_coded_and_the_kept_ones_take_their_intervals(values, bottom, span, coded_top, widths):
    top = (bottom or 0) + span if coded_top or bottom is None else None
    hierarchy = Hierarchy.top_bottom(values, bottom=bottom, top=top, widths=widths)
    kept = sorted({v for v in values if (bottom is None or v >= bottom) and (top is None or v <= top)})
    intervals = {row[0]: row[1:-1] for row in Hierarchy.intervals(kept, widths=widths).rows} if widths and kept \
        else {}
    assert [row[0] for row in hierarchy.rows] == [str(v) for v in sorted(set(values))]
    for row in hierarchy.rows:
        value = int(row[0])
        assert row[-1] == "*" and len(row) == 3 + len(widths or [])
        if bottom is not None and value < bottom:
            assert set(row[1:-1]) == {f"< {bottom}"}
        elif top is not None and value > top:
            assert set(row[1:-1]) == {f"> {top}"}
        else:
            assert row[1] == row[0] and tuple(row[2:-1]) == tuple(intervals.get(row[0], ()))


def test_bad_codes_are_refused_by_name():
    with pytest.raises(HierarchyError, match="'age': the bottom code 80 must lie below the top code 18"):
        Hierarchy.top_bottom(range(100), bottom=80, top=18, name="age")
    with pytest.raises(HierarchyError, match="give a top code, a bottom code, or both"):
        Hierarchy.top_bottom(range(100))
    with pytest.raises(HierarchyError, match="the top code must be a finite number, got nan"):
        Hierarchy.top_bottom(range(100), top=float("nan"))


def test_a_release_coded_at_the_top_and_bottom_shows_the_codes_with_their_bounds(tmp_path):
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"age": rng.integers(0, 100, 2_000), "sex": rng.choice(["F", "M"], 2_000)})
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    domain = range(0, 121)  # the public domain: the bounds show its extremes, not the data's
    age = Hierarchy.top_bottom(domain, bottom=18, top=80, widths=[10], name="age")
    sex = Hierarchy.from_lists([["F", "*"], ["M", "*"]], name="sex")
    policy = Policy(quasi_identifiers={"age": age, "sex": sex}, models=[KAnonymity(5)], suppression_limit=0.05)
    release = duckanon.connect(con).publish("t", policy, {"age": 1, "sex": 0}, tmp_path / "r.duckdb")
    assert duckanon.verify(release.path).holds
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        out = reader.execute("SELECT age, age_low, age_high, sex FROM release").df()
    kept = out[out["sex"] != "*"]
    coded = kept[kept["age"].isin(["< 18", "> 80"])]
    assert set(coded.drop_duplicates(["age", "sex"]).itertuples(index=False, name=None)) >= {("< 18", 0, 17, "F"),
                                                                                    ("> 80", 81, 120, "F")}
    middle = kept[~kept["age"].isin(["< 18", "> 80"])]
    assert (middle["age"].astype(int) == middle["age_low"]).all() and (middle["age_low"] == middle["age_high"]).all()
    # Every record is released on its code: pandas recodes the source and finds the same multiset.
    expected = frame["age"].map(lambda v: "< 18" if v < 18 else "> 80" if v > 80 else str(v))
    suppressed = (out["sex"] == "*").sum()
    assert sorted(out.loc[out["sex"] != "*", "age"]) == sorted(
        expected[expected.groupby([expected, frame["sex"]]).transform("size") >= 5])
    assert suppressed == (expected.groupby([expected, frame["sex"]]).transform("size") < 5).sum()


def test_the_hierarchy_command_builds_top_bottom_coding(tmp_path, capsys):
    pd.DataFrame({"age": [3, 17, 18, 40, 80, 81, 99]}).to_csv(tmp_path / "ages.csv", index=False)
    out = tmp_path / "age.csv"
    assert main(["hierarchy", "top-bottom", str(tmp_path / "ages.csv"), "--column", "age", "--bottom", "18",
                 "--top", "80", "--widths", "20", "-o", str(out)]) == 0
    built = Hierarchy.from_arx_csv(out)
    assert built.rows == Hierarchy.top_bottom([3, 17, 18, 40, 80, 81, 99], bottom=18, top=80, widths=[20]).rows
    assert ("99", "> 80", "> 80", "*") in built.rows and ("40", "40", "[040, 060)", "*") in built.rows
