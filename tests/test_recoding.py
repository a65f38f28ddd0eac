"""The partition map: publishing any per-record group assignment, checked with plain pandas and hand computations."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from sqlglot import ErrorLevel, exp

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy, PolicyError
from duckanon.engine import as_engine
from duckanon.hierarchy.bound import BoundHierarchy
from duckanon.recode.recoding import RECORD, Assignment, PartitionMap, numbered
from duckanon.sqlgen import build as sb

COLOR = Hierarchy.from_lists([["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"],
                              ["green", "cold", "*"]], name="color")
FRAME = pd.DataFrame({
    "id": range(9),
    "age": pd.array([20, 30, 25, 40, 44, None, None, 60, 61], dtype="Int64"),
    "color": ["red", "orange", "red", "blue", "green", "blue", None, None, None],
    "size": ["S", "M", "S", "L", "L", "XL", "M", "S", None],
    "disease": ["flu", "cold", "flu", "hiv", "flu", "cold", "flu", "hiv", "cold"],
})
# Three groups: {0,1,2} {3,4,5} {6,7,8}
GROUPS = {0: 10, 1: 10, 2: 10, 3: 20, 4: 20, 5: 20, 6: 30, 7: 30, 8: 30}
POLICY = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(3)],
                identifiers=["id"], sensitive=["disease"])


@pytest.fixture
def anon(con):
    con.register("frame", FRAME)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    con.register("groups", pd.DataFrame({"id": list(GROUPS), "group_id": list(GROUPS.values())}))
    con.execute("CREATE TABLE a AS SELECT * FROM groups")
    con.unregister("groups")
    return duckanon.connect(con)


def read(path, table="release") -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as reader:
        return reader.execute(f'SELECT * FROM "{table}"').df()


def as_rows(frame: pd.DataFrame, columns) -> list[tuple]:
    return sorted((tuple(None if pd.isna(v) else v for v in row) for row in frame[columns].itertuples(index=False)),
                  key=lambda row: tuple((v is None, str(v)) for v in row))


def test_record_id_assignment_publishes_each_style(anon, tmp_path):
    by_id = Assignment(sb.table("a"), ("id",))
    styles = {"age": "range", "color": "lca", "size": "set"}
    release = anon.publish("t", POLICY, PartitionMap(by_id, styles), tmp_path / "r.duckdb")
    released = read(tmp_path / "r.duckdb")
    assert release.suppressed == 0
    assert list(released.columns) == ["age", "age_low", "age_high", "color", "size", "disease"]
    # The groups by hand: ages 20..30 / 40,44,NULL / NULL,60,61; colors red,orange / blue,green,blue / all NULL;
    # sizes S,M,S / L,L,XL / M,S,NULL.
    expected = pd.DataFrame({
        "age": ["[20, 30]"] * 3 + ["*"] * 3 + ["*"] * 3,
        "age_low": [20] * 3 + [None] * 6,  # a range's bounds; none for '*' (NULL beside numbers)
        "age_high": [30] * 3 + [None] * 6,
        "color": ["warm"] * 3 + ["cold"] * 3 + [None] * 3,
        "size": ["{M,S}"] * 3 + ["{L,XL}"] * 3 + ["*"] * 3,
        "disease": FRAME["disease"],
    })
    assert as_rows(released, list(expected.columns)) == as_rows(expected, list(expected.columns))
    mean = anon.publish("t", POLICY, PartitionMap(by_id, {"age": "mean", "color": "set", "size": "set"}),
                        tmp_path / "m.duckdb")
    assert mean.records_out == 9
    released = read(tmp_path / "m.duckdb")
    assert "age_low" not in released  # beside a mean, a group's bounds would reveal more than the mean
    assert sorted(set(released["age"].dropna())) == ["*", "25.0"]
    assert sorted(set(released["color"].dropna())) == ["{blue,green}", "{orange,red}"]


def test_the_record_pseudo_column_numbers_records_in_the_order_of_their_columns(anon, con, tmp_path):
    columns = ["age", "color", "size", "disease"]
    numbers = as_engine(con).frame(numbered(sb.table("t"), columns))
    # pandas: sort by every released column, NULLs first, and number 1..n.
    ordered = FRAME.sort_values(columns, na_position="first", kind="stable").reset_index(drop=True)
    assert numbers.sort_values(RECORD)["id"].tolist() == ordered["id"].tolist()
    groups = pd.DataFrame({RECORD: numbers[RECORD], "group_id": numbers["id"].map(GROUPS)})
    con.register("g", groups)
    con.execute("CREATE TABLE by_number AS SELECT * FROM g")
    transformation = PartitionMap(Assignment(sb.table("by_number"), (RECORD,)),
                                  {"age": "range", "color": "lca", "size": "set"})
    assert transformation.misplaced(as_engine(con), sb.table("t"), columns) == 0
    anon.publish("t", POLICY, transformation, tmp_path / "n.duckdb")
    by_id = anon.publish("t", POLICY, PartitionMap(Assignment(sb.table("a"), ("id",)), transformation.styles),
                         tmp_path / "i.duckdb")
    assert by_id.records_out == 9
    assert as_rows(read(tmp_path / "n.duckdb"), columns) == as_rows(read(tmp_path / "i.duckdb"), columns)


def test_spread_assignments_deal_records_out_in_order(anon, con, tmp_path):
    # Three records share (size S); two go to group 1 and one to group 2, dealt out in the order of all columns.
    con.execute("CREATE TABLE spread AS SELECT * FROM (VALUES ('S', 1, 2), ('S', 2, 1), ('M', 1, 2), ('L', 2, 2),"
                " ('XL', 2, 1), (NULL, 2, 1)) v(size, group_id, n)")
    assignment = Assignment(sb.table("spread"), ("size",), count="n", spread=True)
    pol = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(1)], identifiers=["id", "color", "size"],
                 sensitive=["disease"], insensitive=[])
    transformation = PartitionMap(assignment, {"age": "range"})
    columns = ["age", "disease"]
    assert transformation.misplaced(as_engine(con), sb.table("t"), columns) == 0
    assigned = as_engine(con).frame(assignment.assigned(sb.table("t"), ["id", "age", "size", "disease"]))
    # pandas: records of size S in the order of (id, age, size, disease) are ids 0, 2, 7 -> groups 1, 1, 2.
    assert assigned.set_index("id")["__group_id"].to_dict() == {0: 1, 2: 1, 7: 2, 1: 1, 6: 1, 3: 2, 4: 2, 5: 2, 8: 2}
    release = anon.publish("t", pol, transformation, tmp_path / "s.duckdb")
    assert release.records_out == 9


def test_misplaced_counts_what_an_assignment_gets_wrong(anon, con):
    columns = ["id", "age", "color", "size", "disease"]
    complete = PartitionMap(Assignment(sb.table("a"), ("id",)), {"age": "range"})
    assert complete.misplaced(as_engine(con), sb.table("t"), columns) == 0
    con.execute("CREATE TABLE missing AS SELECT * FROM a WHERE id <> 4")
    con.execute("CREATE TABLE doubled AS SELECT * FROM a UNION ALL SELECT 4, 99")
    assert PartitionMap(Assignment(sb.table("missing"), ("id",)), {"age": "range"}).misplaced(
        as_engine(con), sb.table("t"), columns) == 1
    assert PartitionMap(Assignment(sb.table("doubled"), ("id",)), {"age": "range"}).misplaced(
        as_engine(con), sb.table("t"), columns) == 1
    con.execute("CREATE TABLE short AS SELECT * FROM (VALUES ('S', 1, 2), ('M', 1, 2), ('L', 2, 2), ('XL', 2, 1),"
                " (NULL, 2, 1)) v(size, group_id, n)")
    assert PartitionMap(Assignment(sb.table("short"), ("size",), count="n", spread=True), {"age": "range"}).misplaced(
        as_engine(con), sb.table("t"), columns) == 1


def stored_color(anon) -> dict[str, BoundHierarchy]:
    """COLOR as the catalog stores it for column color."""
    return {"color": BoundHierarchy("color", *anon.catalog.stored({"color": COLOR})["color"])}


def test_metrics_follow_the_core_definitions(anon, con):
    """LM, DM, NCP and average class size of the three groups, computed by hand."""
    transformation = PartitionMap(Assignment(sb.table("a"), ("id",)), {"age": "range", "color": "lca", "size": "set"})
    columns = ["age", "color", "size", "disease"]
    bound = stored_color(anon)
    metrics = transformation.metrics(as_engine(con), sb.table("t"), columns, bound, [KAnonymity(3)])
    # age: (30-20)/(61-20) for group 1, '*' (1) for groups 2 and 3.  color: warm covers 2 of 4 leaves: LM 1/3,
    # NCP 2/4; cold the same; all NULL: 0.  size: {M,S} 2 of 5 distinct values (S, M, L, XL and none else): LM 1/4,
    # NCP 2/4; {L,XL} the same; '*' 1.
    age = [10 / 41] * 3 + [1.0] * 6
    color = [1 / 3] * 6 + [0.0] * 3
    size = [1 / 3] * 6 + [1.0] * 3
    size_domain = FRAME["size"].nunique()
    assert size_domain == 4
    assert metrics["loss"] == pytest.approx((sum(age) + sum(color) + sum(size)) / 9)
    ncp = sum(age) + 6 * 0.5 + 6 * 0.5 + 3 * 1.0
    assert metrics["ncp"] == pytest.approx(ncp)
    assert metrics["dm"] == 3 * 9 and metrics["average-class-size"] == 3.0
    assert (metrics["records"], metrics["classes"], metrics["suppressed"]) == (9, 3, 0)
    # A group below k counts as suppressed: every record of it loses 1 per attribute and |D| in DM.
    strict = transformation.metrics(as_engine(con), sb.table("t"), columns, bound, [KAnonymity(4)])
    assert strict["suppressed"] == 9 and strict["loss"] == pytest.approx(3.0) and strict["dm"] == 81


def test_frequency_level_metrics_equal_record_level_ones(anon, con):
    """An assignment keyed by the quasi-identifiers and sensitive values with counts is measured on its own rows."""
    keys = ["age", "color", "size", "disease"]
    counted = FRAME.assign(group_id=FRAME["id"].map(GROUPS)).groupby(keys + ["group_id"], dropna=False).size()
    con.register("c", counted.rename("n").reset_index())
    con.execute("CREATE TABLE by_values AS SELECT * FROM c")
    bound = stored_color(anon)
    styles = {"age": "mean", "color": "lca", "size": "set"}
    models = [KAnonymity(3), DistinctLDiversity("disease", 2)]
    frequency = PartitionMap(Assignment(sb.table("by_values"), tuple(keys), count="n"), styles)
    records = PartitionMap(Assignment(sb.table("a"), ("id",)), styles)
    assert frequency.summarizes_assignment and not records.summarizes_assignment
    columns = ["age", "color", "size", "disease"]
    assert frequency.metrics(as_engine(con), sb.table("t"), columns, bound, models) == pytest.approx(
        records.metrics(as_engine(con), sb.table("t"), columns, bound, models))
    generalized = [as_engine(con).frame(m.compile(sb.table("t"), columns, bound)) for m in (frequency, records)]
    assert as_rows(generalized[0], columns) == as_rows(generalized[1], columns)


def test_summaries_made_once_give_what_each_step_computes_alone(anon, con, tmp_path):
    """A publish summarizes the groups into one table (``PartitionMap.summarized``), which its metrics, the bounds and
    the recoding read instead of each summarizing every record: the metrics are the hand-computed ones above, the
    recoded rows, bounds and metrics those each step computes on its own, by records and by weighted rows (with a
    model over sensitive values, whose metrics read the records), and the release records the same metrics."""
    engine, bound, columns = as_engine(con), stored_color(anon), ["age", "color", "size", "disease"]
    keys = ["age", "color", "size", "disease"]
    counted = FRAME.assign(group_id=FRAME["id"].map(GROUPS)).groupby(keys + ["group_id"], dropna=False).size()
    con.register("c", counted.rename("n").reset_index())
    con.execute("CREATE TABLE by_values AS SELECT * FROM c")
    made = []

    def materialize(query):
        made.append(sb.table(f"summarized_{len(made)}"))
        engine.run(sb.create_table_as(made[-1], query, temporary=True))
        return made[-1]

    styles = {"age": "range", "color": "lca", "size": "set"}
    for assignment in (Assignment(sb.table("a"), ("id",)), Assignment(sb.table("by_values"), tuple(keys), count="n")):
        alone = PartitionMap(assignment, styles)
        summarized = alone.summarized(engine, sb.table("t"), columns, bound, materialize)
        assert summarized.summaries_table is not None and alone.summaries_table is None
        assert (summarized.assigned_table is None) == alone.summarizes_assignment
        for models in ([KAnonymity(3)], [KAnonymity(4)], [KAnonymity(3), DistinctLDiversity("disease", 2)]):
            assert summarized.metrics(engine, sb.table("t"), columns, bound, models) == pytest.approx(
                alone.metrics(engine, sb.table("t"), columns, bound, models))
        generalized = [engine.frame(m.compile(sb.table("t"), columns, bound)) for m in (summarized, alone)]
        assert as_rows(generalized[0], columns) == as_rows(generalized[1], columns)
        ranges = [m.ranges(engine, sb.table("t"), columns, bound, materialize).relations["age"]
                  for m in (summarized, alone)]
        assert sorted(engine.rows(exp.select("*").from_(ranges[0]))) == sorted(
            engine.rows(exp.select("*").from_(ranges[1])))
    metrics = summarized.metrics(engine, sb.table("t"), columns, bound, [KAnonymity(3)])
    assert metrics["ncp"] == pytest.approx(sum([10 / 41] * 3 + [1.0] * 6) + 6 * 0.5 + 6 * 0.5 + 3 * 1.0)
    anon.publish("t", POLICY, PartitionMap(Assignment(sb.table("a"), ("id",)), styles), tmp_path / "r.duckdb")
    recorded = duckanon.read_release_info(tmp_path / "r.duckdb")["metrics"]
    assert {k: recorded[k] for k in metrics} == pytest.approx(metrics)


def test_groups_that_violate_the_policy_are_suppressed_by_publish(anon, con, tmp_path):
    con.execute("UPDATE a SET group_id = 40 WHERE id = 8")
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR, "size": None}, models=[KAnonymity(2)],
                 identifiers=["id"], sensitive=["disease"], suppression="drop", suppression_limit=0.2)
    release = anon.publish("t", pol, PartitionMap(Assignment(sb.table("a"), ("id",)),
                                                  {"age": "range", "color": "lca", "size": "set"}),
                           tmp_path / "r.duckdb")
    released = read(tmp_path / "r.duckdb")
    assert release.suppressed == 1 and len(released) == 8
    assert as_rows(released, ["disease"]) == as_rows(FRAME[FRAME["id"] != 8], ["disease"])


def test_bad_maps_are_refused(anon, tmp_path):
    by_id = Assignment(sb.table("a"), ("id",))
    with pytest.raises(PolicyError, match=r"no output style for quasi-identifiers \['size'\]"):
        anon.publish("t", POLICY, PartitionMap(by_id, {"age": "range", "color": "lca"}), tmp_path / "r.duckdb")
    with pytest.raises(PolicyError, match=r"'lca' needs a hierarchy, and \['size'\] have none"):
        anon.publish("t", POLICY, PartitionMap(by_id, {"age": "range", "color": "lca", "size": "lca"}),
                     tmp_path / "r.duckdb")
    with pytest.raises(PolicyError, match="'median' of 'age' is not one of"):
        PartitionMap(by_id, {"age": "median"})
    with pytest.raises(PolicyError, match="needs their count"):
        Assignment(sb.table("a"), ("id",), spread=True)
    with pytest.raises(PolicyError, match="at least one key"):
        Assignment(sb.table("a"), ())
    assert not list(tmp_path.iterdir())


def test_compiled_maps_transpile_to_spark(anon):
    bound = stored_color(anon)
    columns = ["age", "color", "size", "disease"]
    maps = [PartitionMap(Assignment(sb.table("a"), ("id",)), {"age": "mean", "color": "lca", "size": "set"}),
            PartitionMap(Assignment(sb.table("by_values"), tuple(columns), count="n", spread=True),
                         {"age": "range", "color": "lca", "size": "set"}),
            PartitionMap(Assignment(sb.table("n"), (RECORD,)), {"age": "range", "color": "set", "size": "set"})]
    for transformation in maps:
        query = transformation.compile(sb.table("t"), columns, bound)
        assert query.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)
        assert isinstance(query, exp.Select)
