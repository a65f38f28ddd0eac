"""A release of several tables (duckanon.Tables): a person table and event tables joined by a key, the person-level
guarantee over the join recomputed with pandas on every release (each person's set of (table, class) pairs shared by
k people, every record of every table accounted for, a suppressed person suppressed in every table), the search's
verdicts held to the SQL check and to pandas node by node, one pseudonym per person in every table, a column of
several tables generalized alike, the views BI tools join, the recipient's verify, view and SQL macro, and bad input
refused by name with nothing written."""

from __future__ import annotations

import hashlib
import hmac
import os

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from test_person_policy import compared_with_table
from test_sql_macros import MACROS, needs_macros, release_verdicts

import duckanon
from duckanon import (
    AverageReidentificationRisk,
    DistinctLDiversity,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    Pseudonymize,
    Tables,
    TCloseness,
    verify,
)
from duckanon.cli import run
from duckanon.engine.duckdb_engine import DuckDBEngine
from duckanon.errors import PolicyError, PolicyNotSatisfied
from duckanon.release.files import open_release, read_release_info
from duckanon.release.verify import guarantees
from duckanon.report.figures import collect
from duckanon.search.run import evaluator
from duckanon.sqlgen import build as sb

AGES = Hierarchy.intervals(range(100), widths=[10, 20, 40])
ZONES = Hierarchy.from_mapping({z: [z[0] + "*", "*"] for z in ("n1", "n2", "s1", "s2")})
SEXES = Hierarchy.from_mapping({"F": ["*"], "M": ["*"]})
HIERARCHIES = {"sex": SEXES, "zone": ZONES, "age": AGES}
# Each table's quasi-identifiers: age is one column of both event tables.
QUASI = {"patients": ["sex", "zone"], "visits": ["age"], "prescriptions": ["age"]}
KEY = "k" * 40


def tables(visits: list[int], seed: int, prescribed: float = 0.5) -> dict[str, pd.DataFrame]:
    """A person table of ``len(visits)`` people, ``visits[i]`` visits of person i (age drifting), and prescriptions
    for a share of the visits (the age at the visit)."""
    rng = np.random.default_rng(seed)
    n = len(visits)
    patients = pd.DataFrame({"pid": np.arange(n) + 500, "sex": rng.choice(["F", "M"], n),
                             "zone": rng.choice(["n1", "n2", "s1", "s2"], n), "name": [f"P{i}" for i in range(n)]})
    person = np.repeat(np.arange(n), visits)
    age = np.minimum(rng.integers(0, 90, n)[person] + rng.integers(0, 4, len(person)), 99)
    events = pd.DataFrame({"vid": np.arange(len(person)), "pid": person + 500, "age": age,
                           "dx": rng.choice(["a", "b", "c"], len(person))})
    chosen = rng.random(len(events)) < prescribed
    prescriptions = pd.DataFrame({"rx": np.arange(int(chosen.sum())), "pid": events["pid"][chosen].to_numpy(),
                                  "age": events["age"][chosen].to_numpy(),
                                  "drug": rng.choice(["x", "y"], int(chosen.sum()))})
    return {"patients": patients, "visits": events, "prescriptions": prescriptions}


def two_ages(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``frames`` with every event at one of two ages a few years wide, by person: a level below '*' keeps them
    apart and shares them among many people."""
    for name in ("visits", "prescriptions"):
        frames[name]["age"] = np.where(frames[name]["pid"] % 2 == 0, 31, 57) + frames[name].index % 3
    return frames


def connected(frames: dict[str, pd.DataFrame]):
    con = duckdb.connect()
    for name, frame in frames.items():
        con.register("frame", frame)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM frame')
        con.unregister("frame")
    return con, duckanon.connect(con)


def source(frames: dict[str, pd.DataFrame]) -> Tables:
    return Tables({name: name for name in frames}, key="pid")


def policy(k: int = 3, limit: float = 0.2, suppression: str = "replace", **changes) -> Policy:
    declared = {"quasi_identifiers": HIERARCHIES, "models": [KAnonymity(k)], "identifiers": ["name"],
                "insensitive": ["pid", "vid", "rx", "dx", "drug"], "suppression": suppression,
                "suppression_limit": limit}
    return Policy(**{**declared, **changes})


def generalized(frames: dict[str, pd.DataFrame], levels: dict[str, int]) -> dict[str, pd.DataFrame]:
    """Each table with its quasi-identifiers at ``levels``, by the hierarchies' own tables read in pandas."""
    out = {}
    for name, frame in frames.items():
        frame = frame.copy()
        for attribute in QUASI[name]:
            mapping = {str(row[0]): row[levels[attribute]] for row in HIERARCHIES[attribute].rows}
            frame[attribute] = frame[attribute].astype(str).map(mapping)
        out[name] = frame
    return out


def signatures(frames: dict[str, pd.DataFrame]) -> pd.Series:
    """Per person, the frozenset of their (table, class) pairs over every table (pandas)."""
    def pair(name: str, frame: pd.DataFrame) -> pd.Series:  # column by column: an empty table stays a Series
        text = pd.Series(name, index=frame.index, dtype=object)
        for column in QUASI[name]:
            text = text + "\x1f" + frame[column].astype(str)
        return text

    pairs = pd.concat([pd.DataFrame({"pid": frame["pid"], "pair": pair(name, frame)})
                       for name, frame in frames.items()])
    return pairs.groupby("pid")["pair"].agg(frozenset)


def sharing(frames: dict[str, pd.DataFrame]) -> pd.Series:
    """Per person, how many people share their signature."""
    signed = signatures(frames)
    return signed.map(signed.value_counts())


def starred_groups(frames: dict[str, pd.DataFrame], exposed: set) -> int:
    """The fewest exposed people with records in the same set of tables (their signature once all '*')."""
    if not exposed:
        return 0
    where = pd.concat([pd.DataFrame({"pid": f["pid"], "table": n}) for n, f in frames.items()])
    sets = where[where["pid"].isin(exposed)].groupby("pid")["table"].agg(frozenset)
    return int(sets.value_counts().min())


def pandas_node(frames, levels, k, limit, replaced) -> tuple[bool, bool, int, int]:
    """(within the limit, satisfied, people suppressed, records suppressed over all tables) by the definition."""
    sizes = sharing(generalized(frames, levels))
    exposed = set(sizes[sizes < k].index)
    within = len(exposed) <= int(limit * len(frames["patients"]) + 1e-9)
    satisfied = within and not (replaced and exposed and starred_groups(frames, exposed) < k)
    records = sum(int(f["pid"].isin(exposed).sum()) for f in frames.values())
    return within, satisfied, len(exposed), records


def released_tables(path) -> dict[str, pd.DataFrame]:
    """Each table as a recipient reads it: a DuckDB release's view, a Parquet release's file."""
    if path.is_dir():
        return {name: pd.read_parquet(path / f"{name}.parquet") for name in QUASI}
    with duckdb.connect(str(path), read_only=True) as con:
        return {name: con.execute(f'SELECT * FROM "{name}"').df() for name in QUASI}


def stacked_release(path) -> pd.DataFrame:
    """The release's table, the tables stacked, as verification reads it."""
    reader, info = open_release(path)
    try:
        return reader.frame(exp.select(exp.Star()).from_(sb.table(info["released_table"])))
    finally:
        reader.close()


def check_release(frames, released, levels, k, limit, suppression) -> None:
    """Each view is, row for row, what the definition makes of its table at ``levels`` (people whose signature fewer
    than k people share suppressed in every table), and each signature is shared by k people."""
    expected = generalized(frames, levels)
    sizes = sharing(expected)
    exposed = set(sizes[sizes < k].index)
    assert len(exposed) <= int(limit * len(frames["patients"]) + 1e-9)
    for name, frame in expected.items():
        hit = frame["pid"].isin(exposed)
        if suppression == "drop":
            frame = frame[~hit]
        else:
            frame.loc[hit, QUASI[name]] = "*"
        order = frame.columns[0]
        shown = released[name][[c for c in frame.columns if c != "name"]]
        assert "name" not in released[name].columns
        pd.testing.assert_frame_equal(shown.sort_values(order).reset_index(drop=True),
                                      frame.drop(columns=["name"], errors="ignore").sort_values(order)
                                      .reset_index(drop=True), check_dtype=False)
    if len(released["patients"]):
        assert sharing(released).min() >= k


VISITS = st.lists(st.integers(0, 12), min_size=4, max_size=20)  # people without visits, and tables left empty


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(visits=VISITS, seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4),
       suppression=st.sampled_from(["replace", "drop"]), limit=st.sampled_from([0.0, 0.2, 0.5]),
       narrow=st.booleans(), form=st.sampled_from(["duckdb", "parquet"]))
def test_every_release_of_several_tables_gives_each_signature_k_people_and_accounts_for_every_record(
        tmp_path_factory, visits, seed, k, suppression, limit, narrow, form):
    frames = two_ages(tables(visits, seed)) if narrow else tables(visits, seed)
    con, anon = connected(frames)
    target = tmp_path_factory.mktemp("tables") / f"r.{form}"
    try:
        result, _ = anon.anonymize(source(frames), policy(k, limit, suppression), target)
    except PolicyNotSatisfied:
        levels = {a: HIERARCHIES[a].levels - 1 for a in HIERARCHIES}
        assert not pandas_node(frames, levels, k, limit, suppression == "replace")[1]
        return
    finally:
        con.close()
    released = released_tables(target)
    check_release(frames, released, result.levels, k, limit, suppression)
    assert verify(target).holds
    # The stacked table is the tables and nothing more: a column its table lacks is NULL, suppressed or not.
    stacked = stacked_release(target)
    for name, frame in released.items():
        rows = stacked[stacked["__duckanon_table"] == name]
        lacked = [c for c in stacked.columns if c not in frame.columns and c != "__duckanon_table"]
        assert len(rows) == len(frame) and rows[lacked].isna().all().all(), name
    info = read_release_info(target)
    assert info["source_records"] == sum(len(f) for f in frames.values())
    assert info["policy"]["tables"] == {n: [c for c in f.columns if c != "name"] for n, f in frames.items()}


@pytest.mark.parametrize("suppression", ["replace", "drop"])
def test_the_search_verdicts_equal_the_sql_check_and_pandas_at_every_node(suppression):
    frames = tables([1, 2, 5, 0, 3, 1, 7, 2, 4, 9, 0, 1, 2, 6, 3, 3, 1, 2], 8)
    con, anon = connected(frames)
    declared = policy(3, 0.3, suppression)
    with anon.encode(source(frames), declared) as encoded, evaluator(
            anon.workspace, encoded.bound, ["loss"], None, encoding=encoded.encoding) as nodes:
        names = list(encoded.bound.quasi_identifiers)
        for index in range(nodes.lattice.size):
            levels = dict(zip(names, nodes.lattice.node(index)))
            result = nodes.evaluate(index)
            report = encoded.check(levels)
            within, satisfied, people, records = pandas_node(frames, levels, 3, 0.3, suppression == "replace")
            assert (result.within_limit, bool(nodes.satisfies(index)), result.suppressed) == (
                within, satisfied, records), levels
            assert (report.violating_people, report.violating_records, report.within_limit) == (
                people, records, satisfied if suppression == "replace" else within), levels
    con.close()


def test_one_pseudonym_per_person_in_every_table_and_the_views_join(tmp_path, monkeypatch):
    frames = tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], 2)
    con, anon = connected(frames)
    monkeypatch.setenv("TABLES_TEST_KEY", KEY)
    keyed = policy(2, 0.5, insensitive=["vid", "rx", "dx", "drug"],
                   pseudonymize={"pid": Pseudonymize(key="env:TABLES_TEST_KEY")})
    anon.anonymize(source(frames), keyed, tmp_path / "r.duckdb")
    con.close()
    released = released_tables(tmp_path / "r.duckdb")

    def pseudonym(pid: int) -> str:
        return hmac.new(KEY.encode(), str(pid).encode(), hashlib.sha256).hexdigest()

    assert sorted(released["patients"]["pid"]) == sorted(frames["patients"]["pid"].map(pseudonym))
    for name, order in (("visits", "vid"), ("prescriptions", "rx")):
        expected = frames[name].sort_values(order)["pid"].map(pseudonym).tolist()
        assert released[name].sort_values(order)["pid"].tolist() == expected, name
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as release:
        joined = release.execute("SELECT count(*) FROM visits v JOIN patients p USING (pid)").fetchone()[0]
        both = release.execute("SELECT count(*) FROM prescriptions r JOIN visits v USING (pid, age) "
                               "JOIN patients p USING (pid)").fetchone()[0]
    assert joined == len(frames["visits"]) and both > 0
    # The key is in no byte of the release.
    data = (tmp_path / "r.duckdb").read_bytes()
    assert KEY.encode() not in data and KEY.encode().hex().encode() not in data


def test_a_parquet_release_is_a_folder_of_one_file_per_table_that_joins_verifies_and_is_replaced_whole(
        tmp_path, monkeypatch):
    frames = two_ages(tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2, 4))
    con, anon = connected(frames)
    monkeypatch.setenv("TABLES_TEST_KEY", KEY)
    keyed = policy(3, 0.3, insensitive=["vid", "rx", "dx", "drug"],
                   pseudonymize={"pid": Pseudonymize(key="env:TABLES_TEST_KEY")})
    folder = tmp_path / "hospital.parquet"
    _, release = anon.anonymize(source(frames), keyed, folder)
    anon.anonymize(source(frames), keyed, tmp_path / "hospital.duckdb")
    assert sorted(p.name for p in folder.iterdir()) == [
        "_release_info.json", "patients.parquet", "prescriptions.parquet", "visits.parquet"]
    # Each file holds what the DuckDB release's view of its table holds, column for column.
    files, views = released_tables(folder), released_tables(tmp_path / "hospital.duckdb")
    for name in QUASI:
        assert list(files[name].columns) == list(views[name].columns), name
        order = list(files[name].columns)
        pd.testing.assert_frame_equal(files[name].sort_values(order).reset_index(drop=True),
                                      views[name].sort_values(order).reset_index(drop=True), check_dtype=False)
    with duckdb.connect() as shell:
        joined = shell.execute(f"SELECT count(*) FROM '{folder}/visits.parquet' v "
                               f"JOIN '{folder}/patients.parquet' p USING (pid)").fetchone()[0]
    assert joined == len(frames["visits"])
    assert verify(folder).holds
    page = release.report(tmp_path / "hospital.html").read_text()
    assert "The release holds 3 tables joined by pid, each a file of the release&#x27;s folder" in page
    reader, info = open_release(folder)
    assert reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(sb.table("visits"))) == len(frames["visits"])
    reader.close()
    assert info["policy"]["tables"]["patients"] == ["pid", "sex", "zone"]
    for file in folder.iterdir():  # the key is in no byte of any file
        data = file.read_bytes()
        assert KEY.encode() not in data and KEY.encode().hex().encode() not in data, file.name
    # A failed publish leaves the release whole; a new one replaces every file at once.
    earlier = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(PolicyNotSatisfied):
        anon.anonymize(source(frames), policy(3, 0.0, models=[KAnonymity(30)]), folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == earlier
    anon.anonymize(source(frames), policy(2, 0.3), folder)
    assert "pid" in pd.read_parquet(folder / "visits.parquet").columns and verify(folder).holds
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        os.readlink(folder)]  # the earlier folder is gone, no partial is left
    con.close()
    # A value changed in one file is caught: the rows' digest no longer matches.
    visits = pd.read_parquet(folder / "visits.parquet")
    visits.loc[0, "age"] = "*"
    visits.to_parquet(folder / "visits.parquet")
    assert not verify(folder).holds


def test_the_risk_a_release_that_counts_people_claims_and_reports_is_a_persons(tmp_path):
    """A person's prosecutor risk is 1 / the people sharing their signature, however many records their classes
    hold: release_info, verify and the report (both sides) give pandas' figures over the tables."""
    frames = two_ages(tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2, 4))
    con, anon = connected(frames)
    _, release = anon.anonymize(source(frames), policy(3, 0.3), tmp_path / "r.duckdb")
    info = read_release_info(release.path)
    shared = sharing(released_tables(release.path))
    assert info["highest_risk"] == pytest.approx(1 / shared.min())
    assert info["average_risk"] == pytest.approx((1 / shared).mean())  # the signatures per person
    checks = verify(release.path).frame().set_index("guarantee")
    assert checks.loc["highest prosecutor risk of a person", "holds"]
    figures = collect(anon.workspace, release.path, source=source(frames).stack(anon.workspace.engine).relation)
    risk = figures.risk.table().set_index("measure")
    for side, shown in (("release", released_tables(release.path)), ("source", frames)):
        people = sharing(shown)
        assert risk.loc["people", side] == len(people) == len(frames["patients"])
        assert risk.loc["signatures", side] == len(set(signatures(shown)))
        assert risk.loc["highest prosecutor risk of a person", side] == pytest.approx(1 / people.min())
        assert risk.loc["average prosecutor risk of a person", side] == pytest.approx((1 / people).mean())
        assert risk.loc["people alone in their signature", side] == (people == 1).sum()
    assert figures.risk.prosecutor("release")["highest"] == pytest.approx(info["highest_risk"])
    con.close()


def diagnosed_settled(frames, levels, k: int, model) -> set:
    """The people suppressed at ``levels`` by the definition: round after round over the people left, those whose
    signature fewer than k people share and those with a visit in a visits class whose diagnoses (each person's
    once) ``model`` finds too little diverse (or too far from all visits' diagnoses, each person's once); the other
    tables do not hold dx and do not count."""
    out = generalized(frames, levels)
    suppressed: set = set()
    while True:
        kept = {n: f[~f["pid"].isin(suppressed)] for n, f in out.items()}
        if kept["patients"].empty:
            return suppressed
        sizes = sharing(kept)
        newly = set(sizes[sizes < k].index)
        people = kept["visits"].drop_duplicates(["age", "pid", "dx"]).groupby(["age", "dx"]).size()
        if model.compares_with_table:  # with every visit's diagnosis, each person's once: replacement keeps them
            diverse = compared_with_table(people, out["visits"].drop_duplicates(["pid", "dx"])["dx"].value_counts(),
                                          model)
        elif isinstance(model, DistinctLDiversity):
            diverse = people.groupby(level=0).size() >= model.l
        else:
            shares = people / people.groupby(level=0).transform("sum")
            diverse = (-(shares * np.log(shares)).groupby(level=0).sum()) >= np.log(model.l) - 1e-9
        newly |= set(kept["visits"][kept["visits"]["age"].isin(diverse[~diverse].index)]["pid"])
        if not newly:
            return suppressed
        suppressed |= newly


DIAGNOSES = [DistinctLDiversity("dx", 2), EntropyLDiversity("dx", 1.8), TCloseness("dx", 0.25)]


def diagnosed_tables() -> dict[str, pd.DataFrame]:
    """Tables whose visits below age 20 share one diagnosis: classes of the young are not diverse."""
    frames = tables([1, 2, 5, 0, 3, 1, 7, 2, 4, 9, 0, 1, 2, 6, 3, 3, 1, 2, 8, 5, 2, 4] * 3, 3)
    frames["visits"]["dx"] = np.where(frames["visits"]["age"] < 20, "a", frames["visits"]["dx"])
    return frames


def diverse_policy(model, suppression: str = "replace", limit: float = 0.4) -> Policy:
    return policy(3, limit, suppression, models=[KAnonymity(3), model], sensitive=["dx"],
                  insensitive=["pid", "vid", "rx", "drug"])


@pytest.mark.parametrize("model", DIAGNOSES, ids=["distinct", "entropy", "t-closeness"])
def test_l_diversity_of_a_column_of_one_table_counts_its_classes_people_at_every_node_and_in_the_release(
        tmp_path, model):
    frames = diagnosed_tables()
    con, anon = connected(frames)
    declared = diverse_policy(model)
    bites = 0  # nodes where the model suppresses people whose signature k people share
    with anon.encode(source(frames), declared) as encoded, evaluator(
            anon.workspace, encoded.bound, ["loss"], None, encoding=encoded.encoding) as nodes:
        names = list(encoded.bound.quasi_identifiers)
        for index in range(nodes.lattice.size):
            levels = dict(zip(names, nodes.lattice.node(index)))
            suppressed = diagnosed_settled(frames, levels, 3, model)
            sizes = sharing(generalized(frames, levels))
            bites += len(suppressed) > int((sizes < 3).sum())
            records = sum(int(f["pid"].isin(suppressed).sum()) for f in frames.values())
            result, report = nodes.evaluate(index), encoded.check(levels)
            assert (report.violating_people, report.violating_records) == (len(suppressed), records), levels
            assert result.suppressed == records, levels
    assert bites > 0
    result, release = anon.anonymize(source(frames), declared, tmp_path / "r.duckdb")
    con.close()
    suppressed = diagnosed_settled(frames, result.levels, 3, model)
    assert release.check.violating_people == len(suppressed) > 0
    released = released_tables(tmp_path / "r.duckdb")
    for name, frame in generalized(frames, result.levels).items():
        hit = frame["pid"].isin(suppressed)
        frame.loc[hit, QUASI[name]] = "*"
        columns = [c for c in released[name].columns if c in frame.columns]  # not the bounds of age's labels
        shown = released[name][columns].sort_values(frame.columns[0]).reset_index(drop=True)
        expected = frame[columns].sort_values(frame.columns[0]).reset_index(drop=True)
        pd.testing.assert_frame_equal(shown, expected, check_dtype=False)
    checks = verify(tmp_path / "r.duckdb").frame().set_index("guarantee")
    assert checks["holds"].all() and any(g.endswith(" over people") for g in checks.index)
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as written:
        view = dict(written.execute("SELECT guarantee, holds FROM release_verification").fetchall())
    assert all(view.values()) and any(g.endswith(" over people") for g in view)


@pytest.mark.parametrize("suppression", ["replace", "drop"])
def test_a_risk_threshold_over_several_tables_is_judged_alike_in_the_search_the_check_and_the_release(
        tmp_path, suppression):
    """Average risk over people's signature groups of (table, class) pairs: the search's verdicts equal the SQL
    check's at every node (the smallest groups cut, the suppressed people's groups per set of tables), and the release
    meets it as verify, its view and pandas recompute it."""
    frames = two_ages(tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2, 4))
    con, anon = connected(frames)
    declared = policy(2, 0.4, suppression, models=[KAnonymity(2), AverageReidentificationRisk(0.2)])
    cut = 0  # nodes where the threshold suppresses people beyond k
    with anon.encode(source(frames), declared) as encoded, evaluator(
            anon.workspace, encoded.bound, ["loss"], None, encoding=encoded.encoding) as nodes:
        names = list(encoded.bound.quasi_identifiers)
        for index in range(nodes.lattice.size):
            levels = dict(zip(names, nodes.lattice.node(index)))
            result, report = nodes.evaluate(index), encoded.check(levels)
            assert (result.suppressed, bool(nodes.satisfies(index))) == (report.violating_records,
                                                                        report.within_limit), levels
            cut += report.violating_people > int((sharing(generalized(frames, levels)) < 2).sum())
    assert cut > 0
    _, release = anon.anonymize(source(frames), declared, tmp_path / "r.duckdb")
    con.close()
    shared = sharing(released_tables(tmp_path / "r.duckdb"))
    assert (1 / shared).mean() <= 0.2 and verify(tmp_path / "r.duckdb").holds
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as written:
        view = dict(written.execute("SELECT guarantee, holds FROM release_verification").fetchall())
    assert view["average-reidentification-risk with threshold = 0.2 over people"] and all(view.values())


@needs_macros
def test_the_sql_macro_leaves_a_model_of_one_tables_column_to_the_view(tmp_path):
    """anon_verify counts classes over every table; a model of a column some tables lack (each table's classes, of
    the tables holding it) it leaves unrecomputed (holds NULL), and the release's own view recomputes it."""
    frames = diagnosed_tables()
    con, anon = connected(frames)
    anon.anonymize(source(frames), diverse_policy(DIAGNOSES[0]), tmp_path / "r.duckdb")
    con.close()
    rows, view = release_verdicts(tmp_path / "r.duckdb")
    modelled = [g for g in rows if g.startswith("distinct-l-diversity")]
    assert len(modelled) == 1 and rows[modelled[0]] is None
    assert all(holds for g, holds in rows.items() if g not in modelled)
    assert view["distinct-l-diversity of dx with l = 2 over people"] and all(view.values())


def test_a_column_of_several_tables_is_generalized_alike_in_each(tmp_path):
    frames = two_ages(tables([4, 2, 6, 3, 5, 2, 4, 7, 3, 2, 5, 6, 1, 4] * 3, 6))
    con, anon = connected(frames)
    result, _ = anon.anonymize(source(frames), policy(3, 0.3), tmp_path / "r.duckdb")
    con.close()
    released = released_tables(tmp_path / "r.duckdb")
    level = {str(row[0]): row[result.levels["age"]] for row in AGES.rows}
    for name in ("visits", "prescriptions"):
        labels = set(released[name]["age"]) - {"*"}
        assert labels == {level["31"], level["57"]}, name
        assert {"age_low", "age_high"} <= set(released[name].columns)
    assert "age" not in released["patients"].columns


@needs_macros
def test_verify_the_view_and_the_sql_macro_count_tables_and_catch_a_person_made_unique(tmp_path):
    frames = two_ages(tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2, 4))
    con, anon = connected(frames)
    anon.anonymize(source(frames), policy(3, 0.3), tmp_path / "r.duckdb")
    con.close()
    path = tmp_path / "r.duckdb"
    assert verify(path).frame()["holds"].all()
    with duckdb.connect(str(path), read_only=True) as release:
        stacked = release.execute("SELECT * FROM release").df()
    rows, view = release_verdicts(path)
    assert view["k-anonymity over people with k = 3 (by pid)"] and all(view.values())
    assert rows["k-anonymity over people (by pid)"] and all(rows.values())
    # A prescription moved to another table (visits): the values stay, the (table, class) pair changes, and its
    # person's signature is shared by nobody else.  Counting classes without the table would miss it.
    shown = stacked[(stacked["__duckanon_table"] == "prescriptions") & (stacked["age"] != "*")]
    visited = set(stacked[stacked["__duckanon_table"] == "visits"]["pid"])
    moved = shown[shown["pid"].isin(visited)].index[0]
    stacked.loc[moved, "__duckanon_table"] = "visits"
    tampered = duckdb.connect()
    tampered.register("tampered", stacked)
    checks = {c.guarantee: c for c in guarantees(DuckDBEngine(tampered), sb.table("tampered"),
                                                 read_release_info(path))}
    assert checks["k-anonymity over people with k = 3 (by pid)"].holds is False


def with_column(frames, name, column, values):
    changed = {n: f.copy() for n, f in frames.items()}
    changed[name][column] = values
    return changed


BAD = [
    ("no key", lambda f: {**f, "visits": f["visits"].rename(columns={"pid": "patient"})},
     "table 'visits' has no column 'pid', the key"),
    ("key type", lambda f: with_column(f, "visits", "pid", f["visits"]["pid"].astype(str)),
     "the key 'pid' is BIGINT in table 'patients' but VARCHAR in table 'visits'"),
    ("shared column type", lambda f: with_column(f, "prescriptions", "age", f["prescriptions"]["age"].astype(float)),
     "column 'age' is BIGINT in table 'visits' but DOUBLE in table 'prescriptions'"),
    ("null key", lambda f: with_column(f, "visits", "pid", f["visits"]["pid"].astype("Int64").mask(
        f["visits"].index == 0)), "NULL in 1 records of table 'visits'"),
    ("person twice", lambda f: {**f, "patients": pd.concat([f["patients"], f["patients"].iloc[:2]])},
     "the person table 'patients' holds 2 keys"),
    ("missing person", lambda f: {**f, "patients": f["patients"].iloc[1:]},
     "table 'visits': 3 records of 1 people have a key"),
]


@pytest.mark.parametrize("change,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_error_naming_it_and_writes_nothing(tmp_path, change, message):
    frames = change(tables([3, 2, 2, 4, 1, 3], 1))
    con, anon = connected(frames)
    with pytest.raises(PolicyError, match=message):
        anon.anonymize(source(frames), policy(2, 0.5), tmp_path / "r.duckdb")
    con.close()
    assert list(tmp_path.iterdir()) == []


def test_partitioning_several_tables_is_refused_and_writes_nothing(tmp_path):
    frames = tables([3, 2, 2, 4, 1, 3], 1)
    con, anon = connected(frames)
    with pytest.raises(PolicyError, match=r"several tables \(patients, visits.*partitioning forms the classes of one"):
        anon.mondrian(source(frames), policy(2, 0.5), tmp_path / "r.duckdb")
    con.close()
    assert list(tmp_path.iterdir()) == []


def test_bad_declarations_are_refused_by_name(tmp_path):
    with pytest.raises(PolicyError, match="a person table and at least one event table"):
        Tables({"patients": "patients"}, key="pid")
    with pytest.raises(PolicyError, match="differ only in case"):
        Tables({"visits": "a", "Visits": "b"}, key="pid")
    for hidden in ("_visits", ".visits", "a/visits"):
        with pytest.raises(PolicyError, match=f"table name '{hidden}': a table's name names its file"):
            Tables({"patients": "a", hidden: "b"}, key="pid")
    with pytest.raises(PolicyError, match="person_table 'people' is not one of"):
        Tables({"patients": "a", "visits": "b"}, key="pid", person_table="people")
    frames = tables([2, 2, 2, 2], 3)
    con, anon = connected(frames)
    with pytest.raises(PolicyError, match="counts people by 'vid'"):
        anon.anonymize(source(frames), policy(2, 0.5, person="vid"), tmp_path / "r.duckdb")
    with pytest.raises(PolicyError, match="'replace-unchecked'.*suppresses by 'replace' or 'drop'"):
        anon.anonymize(source(frames), policy(2, 0.5, "replace-unchecked"), tmp_path / "r.duckdb")
    con.close()
    frames["release"] = frames.pop("prescriptions")
    con, anon = connected(frames)
    with pytest.raises(duckanon.AnonymizationError, match="table 'release' would take the name"):
        anon.anonymize(source(frames), policy(2, 0.5), tmp_path / "r.duckdb")
    con.close()
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_releases_and_measures_several_tables(tmp_path):
    frames = two_ages(tables([4, 2, 6, 3, 5, 2, 4, 7, 3, 2, 5, 6, 1, 4] * 3, 6))
    for name, frame in frames.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    for name, hierarchy in HIERARCHIES.items():
        hierarchy.to_arx_csv(tmp_path / f"{name}.csv")
    target = tmp_path / "r.duckdb"
    roles = ["--qi", "sex", "--qi", "zone", "--qi", "age", "--hierarchies", str(tmp_path), "--identifier", "name"]
    for column in ("pid", "vid", "rx", "dx", "drug"):
        roles += ["--insensitive", column]
    events = ["--events", str(tmp_path / "visits.parquet"), "--events", str(tmp_path / "prescriptions.parquet")]
    code = run([str(tmp_path / "patients.parquet"), *events, "--person", "pid", *roles, "-k", "3",
                "--suppression-limit", "0.3", "-o", str(target)])
    assert code == 0
    levels = read_release_info(target)["transformation"]["full-domain generalization"]
    check_release(frames, released_tables(target), levels, 3, 0.3, "replace")
    folder = tmp_path / "r.parquet"  # the same release as a folder of one Parquet file per table
    assert run([str(tmp_path / "patients.parquet"), *events, "--person", "pid", *roles, "-k", "3",
                "--suppression-limit", "0.3", "-o", str(folder)]) == 0
    check_release(frames, released_tables(folder), levels, 3, 0.3, "replace")
    assert run(["verify", str(folder)]) == 0
    measured = duckanon.connect().person_exposure(
        Tables({n: str(tmp_path / f"{n}.parquet") for n in frames}, key="pid"), ["sex", "zone", "age"], "pid", 3)
    assert measured.people == len(frames["patients"])
    assert measured.people_below_k == int((sharing(frames) < 3).sum())
    assert run(["exposure", str(tmp_path / "patients.parquet"), *events, "--qi", "sex", "--qi", "zone", "--qi",
                "age", "--person", "pid", "-k", "3"]) == 0
    with pytest.raises(duckanon.AnonymizationError, match="--events needs --person"):
        run([str(tmp_path / "patients.parquet"), *events, *roles, "-k", "3", "-o", str(tmp_path / "x.duckdb")])
    assert not (tmp_path / "x.duckdb").exists()


def test_the_report_names_the_tables_and_their_verification(tmp_path):
    frames = two_ages(tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 2, 4))
    con, anon = connected(frames)
    _, release = anon.anonymize(source(frames), policy(3, 0.3), tmp_path / "r.duckdb")
    page = release.report(tmp_path / "r.html", frontier=[2, 3, 4]).read_text()
    con.close()
    assert "The release holds 3 tables joined by pid" in page and "prescriptions (rx, pid, age, drug)" in page
    assert "k-anonymity over people with k = 3 (by pid)" in page and "P1" not in page
    assert "frontier" in page.lower()


@needs_macros
def test_the_sql_macro_measures_tables_stacked_with_their_name_as_a_quasi_identifier():
    """In the DuckDB shell: tables stacked with UNION ALL BY NAME, each row's table name among qi_cols, give
    anon_person_exposure the figures Anonymizer.person_exposure gives for Tables."""
    frames = tables([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], 7)
    con, anon = connected(frames)
    con.execute(MACROS.read_text(encoding="utf-8"))
    con.execute("CREATE VIEW stacked AS SELECT *, 'patients' AS tbl FROM patients "
                "UNION ALL BY NAME SELECT *, 'visits' AS tbl FROM visits "
                "UNION ALL BY NAME SELECT *, 'prescriptions' AS tbl FROM prescriptions")
    shell = con.execute("SELECT people, records, signatures, people_below_k, unique_people "
                        "FROM anon_person_exposure('stacked', ['sex', 'zone', 'age', 'tbl'], 'pid', 3)").fetchone()
    measured = anon.person_exposure(source(frames), ["sex", "zone", "age"], "pid", 3)
    con.close()
    assert shell == (measured.people, measured.records, measured.signatures, measured.people_below_k,
                     measured.unique_people)
    assert measured.people_below_k == int((sharing(frames) < 3).sum())


def test_a_release_over_any_of_its_tables_files_is_refused_and_leaves_it_whole(tmp_path):
    frames = two_ages(tables([4, 2, 6, 3, 5, 2, 4, 7, 3, 2, 5, 6, 1, 4] * 3, 6))
    for name, frame in frames.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    files = {name: tmp_path / f"{name}.parquet" for name in frames}
    before = {name: path.read_bytes() for name, path in files.items()}
    anon = duckanon.connect()
    for target in ("visits", "prescriptions"):
        with pytest.raises(duckanon.AnonymizationError, match="is the source file"):
            anon.anonymize(Tables({n: str(p) for n, p in files.items()}, key="pid"), policy(3, 0.3),
                           files[target])
    assert {name: path.read_bytes() for name, path in files.items()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files.values())
