"""Privacy models' verdicts over arrays (``PrivacyModel.cell_violations``, ``minimum_size``) against their SQL form.

The SQL side is DuckDB running ``class_verdicts`` over a table; the array side is a ``ClassCells`` built from the same
table with pandas: value codes ranked as DuckDB's ORDER BY ranks them (NULL last), texts as DuckDB casts them to
VARCHAR.  Every model, each t-closeness distance and random parameters (drawn on and off the boundaries the data
offers) must give the same verdict for every class.  Hand-computed cases pin the distances and the recursive
comparison to known values.
"""

from __future__ import annotations

import math
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckanon import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from duckanon.engine import as_engine
from duckanon.privacy.models import _grassberger
from duckanon.privacy.cells import ClassCells, SensitiveValues
from duckanon.privacy.checks import class_verdicts
from duckanon.privacy.classes import Classes
from duckanon.sqlgen import build as sb

KEYS = ["q0", "q1"]
TEXTS = ["x", "y", "z", "w", "10", "9"]  # "10" < "9" as text
NUMBERS = [-3, 0, 2, 9, 10, 11]


def missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def class_cells(frame: pd.DataFrame, keys, sensitive: str, weight: str | None) -> tuple[ClassCells, list[tuple]]:
    """The classes of ``frame`` over ``keys`` as ClassCells, computed with pandas, and each class's key tuple."""
    present = sorted({v for v in frame[sensitive] if not missing(v)})  # ints by value, strings by code point
    has_null = any(missing(v) for v in frame[sensitive])
    code_of = {v: i for i, v in enumerate(present)}
    texts = tuple(str(v) for v in present) + ((None,) if has_null else ())
    records = pd.DataFrame({
        "cls": frame.groupby(keys, dropna=False, sort=True).ngroup(),
        "code": [len(present) if missing(v) else code_of[v] for v in frame[sensitive]],
        "n": frame[weight] if weight else 1,
    })
    cells = records.groupby(["cls", "code"]).n.sum().reset_index().sort_values(["cls", "code"])
    sizes = records.groupby("cls").n.sum().sort_index()
    table = records.groupby("code").n.sum().reindex(range(len(texts)), fill_value=0)
    first_rows = frame.assign(cls=records.cls).drop_duplicates("cls").sort_values("cls")
    class_keys = [tuple(None if missing(v) else v for v in row) for row in first_rows[keys].itertuples(index=False)]
    as_int = lambda column: np.asarray(column, dtype=np.int64)  # noqa: E731
    return ClassCells(sizes=as_int(sizes), cell_class=as_int(cells.cls), cell_value=as_int(cells.code),
                      cell_count=as_int(cells.n), table_counts=as_int(table),
                      values=SensitiveValues(texts)), class_keys


def sql_verdicts(frame: pd.DataFrame, keys, weight: str | None, models) -> dict[tuple, list[bool]]:
    """{class key: [verdict per model]} from DuckDB's class_verdicts."""
    con = duckdb.connect()
    try:
        con.register("t", frame)
        rows = as_engine(con).rows(class_verdicts(Classes.of(sb.table("t"), keys, weight=weight), models))
    finally:
        con.close()
    return {row[:len(keys)]: list(row[len(keys) + 1:len(keys) + 1 + len(models)]) for row in rows}


def array_verdicts(cells: ClassCells, model) -> np.ndarray:
    """One model's verdicts over arrays: too small, or violating its condition on the sensitive values."""
    verdict = np.zeros(cells.classes, dtype=bool)
    if model.minimum_size is not None:
        verdict |= cells.sizes < model.minimum_size
    violations = model.cell_violations(cells)
    if violations is not None:
        assert violations.shape == (cells.classes,) and violations.dtype == bool, model
        verdict |= violations
    return verdict


def assert_same_verdicts(frame, sensitive, weight, models):
    cells, class_keys = class_cells(frame, KEYS, sensitive, weight)
    expected = sql_verdicts(frame, KEYS, weight, models)
    assert set(expected) == set(class_keys) and len(expected) == len(class_keys)
    for i, model in enumerate(models):
        got = dict(zip(class_keys, array_verdicts(cells, model).tolist()))
        assert got == {key: flags[i] for key, flags in expected.items()}, model


# ========================================================================================= random tables


def random_hierarchy(draw, texts):
    """A hierarchy of 1 to 3 levels over some of ``texts`` (the rest uncovered), with inner labels that may be None
    and perhaps a NULL row."""
    height = draw(st.integers(1, 3))
    parents = {height: {"*": None}}  # per level, label → its parent one level up
    for level in range(height - 1, 0, -1):
        pool = [f"L{level}{i}" for i in range(draw(st.integers(1, 3)))] + draw(st.sampled_from([[], [None]]))
        parents[level] = {label: draw(st.sampled_from(sorted(parents[level + 1], key=str))) for label in pool}
    covered = draw(st.lists(st.sampled_from(texts), unique=True, min_size=1))
    leaves = covered + ([None] if draw(st.booleans()) else [])
    rows = []
    for leaf in leaves:
        row, label = [leaf], draw(st.sampled_from(sorted(parents[1] if height > 1 else parents[height], key=str)))
        for level in range(1, height + 1):
            row.append(label)
            label = parents[level][label]
        rows.append(row)
    return Hierarchy.from_lists(rows)


def boundary_or(draw, listed, boundaries):
    """A parameter from ``listed`` or one the data puts exactly on a class's boundary."""
    return draw(st.sampled_from([*listed, *boundaries]))


def largest_shares(cells: ClassCells, group_of_text) -> list[float]:
    """Per class, the largest share of its records whose values' texts ``group_of_text`` puts in one group."""
    shares = []
    for c in range(cells.classes):
        pooled = Counter()
        for code, n in zip(cells.cell_value[cells.cell_class == c], cells.cell_count[cells.cell_class == c]):
            pooled[group_of_text(cells.values.texts[code])] += int(n)
        shares.append(max(pooled.values()) / int(cells.sizes[c]))
    return shares


def random_models(draw, frame, sensitive, weight, universe):
    cells, _ = class_cells(frame, KEYS, sensitive, weight)
    counts = [cells.cell_count[cells.cell_class == c] for c in range(cells.classes)]
    sizes = cells.sizes.tolist()
    entropies = [math.exp(math.log(n.sum()) - float((n * np.log(n)).sum()) / n.sum()) for n in counts]
    shares = largest_shares(cells, lambda text: text)
    tails = [(int(n.max()), int(np.sort(n)[::-1][1:].sum())) for n in counts]
    k = lambda: draw(st.sampled_from([1, 2, 3, *sizes, max(sizes) + 1]))  # noqa: E731
    models = [
        KAnonymity(k()),
        DistinctLDiversity(sensitive, draw(st.integers(1, 5))),
        EntropyLDiversity(sensitive, max(1.0, boundary_or(draw, [1, 1.5, 2, 2.5, 3], entropies))),
        RecursiveCLDiversity(sensitive, boundary_or(draw, [0.1, 0.3, 0.5, 0.7, 1, 1.1, 1.5, 2, 3.0, 1e-05, 1e16],
                                                    [first / tail for first, tail in tails if tail]),
                             draw(st.integers(2, 4))),
        AlphaKAnonymity(sensitive, boundary_or(draw, [0.25, 1 / 3, 0.5, 2 / 3, 1.0], shares), k()),
        AlphaKAnonymity(sensitive, boundary_or(draw, [1 / 3, 0.5, 0.75], shares), k(),
                        highly_sensitive=draw(st.lists(st.sampled_from(universe), min_size=1, unique=True))),
    ]
    p = draw(st.integers(1, 3))
    models.append(PSensitiveKAnonymity(sensitive, p, draw(st.integers(p, 4))))
    # Values without a level (and NULL) pool into one group: the boundaries drawn are those of the pooled shares.
    levels = draw(st.dictionaries(st.sampled_from(universe), st.integers(1, 3), min_size=1, max_size=4))
    named = {str(value): level for value, level in levels.items()}
    level_shares = largest_shares(cells, lambda text: None if text is None else named.get(text))
    level_l = draw(st.integers(1, 3))
    models.append(AlphaLDiversityKAnonymity(sensitive, boundary_or(draw, [0.5, 2 / 3, 1.0], level_shares), level_l,
                                            draw(st.integers(level_l, 4)), levels))
    # β-likeness and δ-disclosure, their parameters also on a value's boundary: a class's largest relative gain, or
    # its largest |log2 p/q|.
    p = cells.cell_count / cells.sizes[cells.cell_class]
    q = cells.table_shares()[cells.cell_value]
    gains = [float(g) for g in (p - q) / q if g > 0]
    disclosures = [float(d) for d in np.abs(np.log2(p / q)) if d > 0]
    models.append(BasicBetaLikeness(sensitive, boundary_or(draw, [0.1, 0.5, 1.0, 2.0], gains)))
    models.append(EnhancedBetaLikeness(sensitive, boundary_or(draw, [0.1, 0.5, 1.0, 2.0], gains)))
    models.append(DeltaDisclosurePrivacy(sensitive, boundary_or(draw, [0.2, 0.5, 1.0, 3.0], disclosures)))
    estimates = [math.exp(float(_grassberger(n.sum()) - (n * _grassberger(n)).sum() / n.sum())) for n in counts]
    models.append(EntropyLDiversity(sensitive, max(1.0, boundary_or(draw, [1, 1.5, 2, 3], estimates)), "grassberger"))
    hierarchies = [random_hierarchy(draw, [str(v) for v in universe]) for _ in range(2)]
    for distance, hierarchy in [("equal", None), ("ordered", None), *[("hierarchical", h) for h in hierarchies]]:
        probe = TCloseness(sensitive, 0.5, distance, hierarchy)
        emds = {"equal": probe._equal_emd, "ordered": probe._ordered_emd,
                "hierarchical": probe._hierarchical_emd}[distance](cells).tolist()
        t = boundary_or(draw, [0, 0.1, 0.25, 1 / 3, 0.5], [min(max(e, 0.0), 1.0) for e in emds])
        models.append(TCloseness(sensitive, t, distance, hierarchy))
    return models


@st.composite
def tables(draw):
    numbers = draw(st.booleans())
    universe = NUMBERS if numbers else TEXTS
    rows = draw(st.lists(st.tuples(st.sampled_from([0, 1, 2, None]), st.sampled_from(["a", "b", None]),
                                   st.sampled_from([*universe, None]), st.integers(1, 4)), min_size=1, max_size=30))
    frame = pd.DataFrame({
        "q0": pd.array([r[0] for r in rows], dtype="Int64"),
        "q1": pd.Series([r[1] for r in rows], dtype=object),
        "s": pd.array([r[2] for r in rows], dtype="Int64") if numbers else pd.Series([r[2] for r in rows], dtype=object),
        "w": [r[3] for r in rows],
    })
    weight = draw(st.sampled_from(["w", None]))
    return frame, weight, random_models(draw, frame, "s", weight, universe)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=tables())
def test_array_verdicts_equal_sql_verdicts(case):
    frame, weight, models = case
    assert_same_verdicts(frame, "s", weight, models)


# ========================================================================================= by hand


def test_minimum_size_is_k_and_drives_the_size_predicate():
    models = [KAnonymity(4), AlphaKAnonymity("s", 0.5, 3), PSensitiveKAnonymity("s", 2, 5),
              AlphaLDiversityKAnonymity("s", 0.5, 2, 6, {"x": 1}), DistinctLDiversity("s", 2), TCloseness("s", 0.2)]
    assert [m.minimum_size for m in models] == [4, 3, 5, 6, None, None]
    size = sb.col("size")
    assert [sb.to_sql(p) if (p := m.size_violation(size)) is not None else None for m in models] == [
        '"size" < 4', '"size" < 3', '"size" < 5', '"size" < 6', None, None]
    assert KAnonymity(2).cell_violations(cells_by_hand([[3], [1]], ["x"])) is None


def cells_by_hand(classes: list[list[int]], texts, table=None) -> ClassCells:
    """ClassCells from per class its records per value code (zeros are no cell); ``table`` defaults to their sum."""
    counts = np.array(classes, dtype=np.int64).reshape(len(classes), len(texts))
    cell_class, cell_value = np.nonzero(counts)
    return ClassCells(sizes=counts.sum(axis=1), cell_class=cell_class.astype(np.int64),
                      cell_value=cell_value.astype(np.int64), cell_count=counts[cell_class, cell_value],
                      table_counts=np.array(table if table is not None else counts.sum(axis=0), dtype=np.int64),
                      values=SensitiveValues(tuple(texts)))


def test_recursive_cl_diversity_compares_with_c_as_written():
    # One class: r1 = 55 and fifty values once, so for l = 2 the tail is 50.  c = 1.1 puts r1 exactly on c·tail
    # (55 >= 1.1·50 = 55: violated), though 1.1 · 50.0 in doubles is 55.00000000000001.  c = 1.2: 55 < 60 passes.
    texts = [f"v{i:02d}" for i in range(51)]
    cells = cells_by_hand([[55] + [1] * 50], texts)
    assert 1.1 * 50.0 > 55
    verdicts = [RecursiveCLDiversity("s", c, l).cell_violations(cells)[0]
                for c, l in [(1.1, 2), (1.2, 2), (1e-05, 2), (1e16, 2), (1, 51), (55, 51), (55.5, 51), (0.5, 52)]]
    # l = 51: the tail is the last count, 1: 55 >= 1·1, 55 >= 55·1 violate, 55 < 55.5 passes; l = 52: no tail,
    # 55 >= 0.5·0.
    assert verdicts == [True, False, True, False, True, True, False, True]
    frame = pd.DataFrame({"q0": [1] * 51, "s": texts, "w": [55] + [1] * 50})
    models = [RecursiveCLDiversity("s", c, 2) for c in (1.1, 1.2)]
    assert sql_verdicts(frame, ["q0"], "w", models) == {(1,): [True, False]}


def test_recursive_cl_diversity_with_counts_beyond_64_bits_of_product():
    # r = (3·10^9, 10^10 spread over ten values): tail 10^10 for l = 2.  c = 0.30000000000000004 as a decimal:
    # 0.30000000000000004 · 10^10 = 3000000000.0000004 > r1, passes; c = 0.3: exactly r1, violated.  The products
    # r1 · 10^17 overflow 64 bits, so the comparison takes Python integers.
    cells = cells_by_hand([[3 * 10 ** 9] + [10 ** 9] * 10], [f"v{i}" for i in range(11)])
    got = [RecursiveCLDiversity("s", c, 2).cell_violations(cells)[0] for c in (0.30000000000000004, 0.3)]
    assert got == [False, True]
    frame = pd.DataFrame({"q0": [1] * 11, "s": [f"v{i}" for i in range(11)], "w": [3 * 10 ** 9] + [10 ** 9] * 10})
    models = [RecursiveCLDiversity("s", c, 2) for c in (0.30000000000000004, 0.3)]
    assert sql_verdicts(frame, ["q0"], "w", models) == {(1,): [False, True]}


def test_ordered_distance_salary_example():
    # Li, Li, Venkatasubramanian 2007, §4 (see tests/test_models.py): 0.375, 1/6 and 17/72.
    cells = cells_by_hand([[1, 1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 1, 0, 0, 1], [0, 0, 0, 0, 1, 0, 1, 1, 0]],
                          [str(s) for s in range(3000, 12000, 1000)])
    model = TCloseness("s", 17 / 72, "ordered")
    assert model._ordered_emd(cells) == pytest.approx([0.375, 1 / 6, 17 / 72], abs=1e-12)
    assert model.cell_violations(cells).tolist() == [True, False, False]


def test_ordered_domain_is_the_values_the_table_holds():
    # Codes a, b, c, d, but the table holds no b (its records were dropped): the domain is (a, c, d), Q = (1/2, 1/4,
    # 1/4), m - 1 = 2.  Class (a, a): running P - Q = 1/2, 1/4, 0 → 3/4 / 2 = 3/8; class (c, d): -1/2, -1/4, 0 → 3/8.
    # (With b in the domain it would be 5/4 / 3.)
    cells = cells_by_hand([[2, 0, 0, 0], [0, 0, 1, 1]], ["a", "b", "c", "d"])
    assert TCloseness("s", 0.5, "ordered")._ordered_emd(cells) == pytest.approx([3 / 8, 3 / 8], abs=1e-12)
    frame = pd.DataFrame({"q0": [1, 1, 2, 2], "s": ["a", "a", "c", "d"]})
    models = [TCloseness("s", t, "ordered") for t in (3 / 8, 0.37)]
    assert sql_verdicts(frame, ["q0"], None, models) == {(1,): [False, True], (2,): [False, True]}
    assert [m.cell_violations(cells).tolist() for m in models] == [[False, False], [True, True]]


# The disease hierarchy of Li, Li and Venkatasubramanian 2007 (H = 3: leaves, groups, systems, the root).
DISEASES = Hierarchy.from_lists([
    [leaf, group, system, "respiratory & digestive"] for system, groups in {
        "digestive": {"stomach": ["gastric ulcer", "gastritis", "stomach cancer"],
                      "colon": ["colitis", "diarrhea", "colon cancer"]},
        "respiratory": {"respiratory infection": ["flu", "pneumonia", "bronchitis"],
                        "vascular lung": ["pulmonary edema", "pulmonary embolism"]},
    }.items() for group, leaves in groups.items() for leaf in leaves])


def test_hierarchical_distance_on_the_disease_hierarchy():
    # Nine patients: gastric ulcer 1, gastritis 2, stomach cancer 2, flu 1, bronchitis 2, pneumonia 1, so Q is
    # (1, 2, 2, 1, 2, 1)/9 and the digestive and respiratory systems hold 5/9 and 4/9.  Classes of three:
    # A = (gastric ulcer, gastritis, stomach cancer): stomach +4/9 against respiratory infection -4/9, moved across
    #     the root (cost 1): 4/9.
    # B = (gastritis, flu, bronchitis): stomach node pos 1/9 neg 3/9 → 1/3 · 1/9; respiratory infection pos 3/9 neg
    #     1/9 → 1/3 · 1/9; root: digestive -2/9, respiratory +2/9 → 2/9.  8/27.
    # C = (gastric ulcer, stomach cancer, pneumonia): stomach pos 3/9 neg 2/9 → 2/27; respiratory infection pos 2/9
    #     neg 3/9 → 2/27; root 1/9.  7/27.
    # D = (gastritis, bronchitis, stomach cancer): 1/27 + 1/27 + root 1/9 = 5/27.
    # Tables: A, B and (bronchitis, pneumonia, stomach cancer) = 8/27 (B's mirror); or C, B and D.
    first = pd.DataFrame({"q0": [1] * 3 + [2] * 3 + [3] * 3, "s": [
        "gastric ulcer", "gastritis", "stomach cancer", "gastritis", "flu", "bronchitis",
        "bronchitis", "pneumonia", "stomach cancer"]})
    second = pd.DataFrame({"q0": [1] * 3 + [2] * 3 + [3] * 3, "s": [
        "gastric ulcer", "stomach cancer", "pneumonia", "gastritis", "flu", "bronchitis",
        "gastritis", "bronchitis", "stomach cancer"]})
    for frame, expected in ((first, [4 / 9, 8 / 27, 8 / 27]), (second, [7 / 27, 8 / 27, 5 / 27])):
        cells, keys = class_cells(frame, ["q0"], "s", None)
        assert keys == [(1,), (2,), (3,)]
        model = TCloseness("s", 0.3, "hierarchical", DISEASES)
        emd = model._hierarchical_emd(cells)
        assert emd == pytest.approx(expected, abs=1e-12)
        assert emd == pytest.approx(transport_cost(cells, DISEASES), abs=1e-9)
        models = [TCloseness("s", t, "hierarchical", DISEASES) for t in (*expected, 0.25)]
        sql = sql_verdicts(frame, ["q0"], None, models)
        for i, m in enumerate(models):
            assert m.cell_violations(cells).tolist() == [sql[key][i] for key in keys]
            assert m.cell_violations(cells).tolist() == [e > m.t + 1e-9 for e in expected]


def transport_cost(cells: ClassCells, hierarchy: Hierarchy) -> list[float]:
    """The earth mover's distance itself, per class: the transport problem solved with ground distance
    height(lowest common ancestor) / H."""
    optimize = pytest.importorskip("scipy.optimize")
    paths = {row[0]: row for row in hierarchy.rows}
    leaves = list(cells.values.texts)
    n = len(leaves)
    ground = np.array([[next(level for level in range(hierarchy.levels) if paths[a][level] == paths[b][level])
                        / hierarchy.height for b in leaves] for a in leaves])
    q = cells.table_counts / cells.table_counts.sum()
    costs = []
    for c in range(cells.classes):
        p = np.zeros(n)
        mine = cells.cell_class == c
        p[cells.cell_value[mine]] = cells.cell_count[mine] / cells.sizes[c]
        equalities = [np.kron(np.eye(n)[i], np.ones(n)) for i in range(n)] + [np.kron(np.ones(n), np.eye(n)[j])
                                                                              for j in range(n)]
        costs.append(optimize.linprog(ground.ravel(), A_eq=np.array(equalities), b_eq=np.concatenate([p, q])).fun)
    return costs


def test_hierarchical_distance_null_and_values_the_hierarchy_lacks():
    # Tree * ─ A ─ a1, a2; * ─ B ─ b1.  NULL (no NULL row) and "c" (not in the tree) both hang right under the root,
    # in one group on level 1 (the SQL labels both NULL there).  Table: a1 1, a2 1, b1 1, c 1, NULL 2 of 6.
    # Class (NULL, NULL): level 1 node NULL: children NULL +2/3 (p 1, q 1/3), c -1/6 → min(2/3, 1/6) · 1/2 = 1/12;
    #   root: A -1/3, B -1/6, NULL-group +1/2 → 1/2.  EMD 7/12.
    # Class (c, a1, a2, b1): level 1: node A: a1 +1/12, a2 +1/12 → 0; node B: b1 +1/12 → 0; node NULL: c +1/12, NULL
    #   -1/3 → 1/12 · 1/2 = 1/24; root: A +1/6, B +1/12, NULL-group -1/4 → 1/4.  EMD 7/24.
    tree = Hierarchy.from_lists([["a1", "A", "*"], ["a2", "A", "*"], ["b1", "B", "*"]])
    cells = cells_by_hand([[0, 0, 0, 0, 2], [1, 1, 1, 1, 0]], ["a1", "a2", "b1", "c", None])
    model = TCloseness("s", 7 / 24, "hierarchical", tree)
    assert model._hierarchical_emd(cells) == pytest.approx([7 / 12, 7 / 24], abs=1e-12)
    frame = pd.DataFrame({"q0": [1, 1, 2, 2, 2, 2], "s": [None, None, "a1", "a2", "b1", "c"]})
    assert sql_verdicts(frame, ["q0"], None, [model]) == {(1,): [True], (2,): [False]}
    assert model.cell_violations(cells).tolist() == [True, False]


def test_alpha_l_diversity_pools_null_and_values_without_a_level():
    # Levels: x 1 only.  Class (y, z, NULL, x): y, z and NULL have no level and pool into one group of 3/4 of the
    # records, above α = 0.7 (apart, each would hold 1/4); class (x, x, y): level 1 holds 2/3.
    cells = cells_by_hand([[1, 1, 1, 1], [2, 1, 0, 0]], ["x", "y", "z", None])
    models = [AlphaLDiversityKAnonymity("s", alpha, 2, 2, {"x": 1}) for alpha in (0.7, 0.75, 2 / 3, 0.6)]
    assert [m.cell_violations(cells).tolist() for m in models] == [
        [True, False], [False, False], [True, False], [True, True]]
    frame = pd.DataFrame({"q0": [1, 1, 1, 1, 2, 2, 2], "s": ["y", "z", None, "x", "x", "x", "y"]})
    assert sql_verdicts(frame, ["q0"], None, models) == {(1,): [True, False, True, True], (2,): [False, False, False,
                                                                                                   True]}
