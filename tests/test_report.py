"""The HTML report, rendered in headless chromium: for a full-domain, a Mondrian, a clustering and a perturbed release,
no console error, no failed or network load, no sideways scrolling at a narrow width, and the figures the page shows
equal numbers computed here with pandas and NumPy from the release file and the source.  Screenshots at desktop and
narrow width go to the test's folder (``DUCKANON_REPORT_SCREENSHOTS`` names a folder to keep them in)."""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import duckanon
from duckanon import MDAV, EmpiricalSynthesis, Hierarchy, KAnonymity, Policy, datasets
from duckanon.errors import AnonymizationError
from duckanon.release.files import read_release_info
from duckanon.report.figures import collect
from duckanon.report.protected import NOT_SHOWN
from duckanon.sqlgen import build as sb
from duckanon.utility.distributions import MISSING, OTHERS, Bins
from tests.browser import Browser

pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")

QUASI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LABEL = "salary-class"
FIGURE = re.compile(r'data-figure="([^"]+)" data-value="([^"]*)"')


@pytest.fixture(scope="module")
def adult():
    con = duckdb.connect()
    datasets.load_adult(con, "adult")
    con.execute("CREATE TABLE sample AS SELECT * FROM adult USING SAMPLE 1500 ROWS (reservoir, 7)")
    yield con
    con.close()


@pytest.fixture(scope="module")
def anon(adult):
    return duckanon.connect(adult)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("reports")


@pytest.fixture(scope="module")
def browser():
    with Browser() as opened:
        yield opened


def hierarchies(names):
    folder = datasets.adult_hierarchy_dir()
    return {q: Hierarchy.from_arx_csv(folder / f"{q}.csv") for q in names}


@pytest.fixture(scope="module")
def reports(anon, folder):
    """Each kind of release with its report: (release path, report path, source table)."""
    made = {}
    full = Policy(quasi_identifiers=hierarchies(QUASI), models=[KAnonymity(5)], sensitive=[LABEL], others="drop",
                  suppression_limit=0.05)
    _, release = anon.anonymize("adult", full, folder / "full.duckdb", metric="loss", table="adult")
    made["full-domain"] = (release.path, release.report(folder / "full.html", label=LABEL, sampling_fraction=0.1,
                                                        frontier=[2, 5, 10, 50]), "adult")
    partitioned = Policy(quasi_identifiers={"age": None, **hierarchies(["sex", "education", "marital-status"])},
                         models=[KAnonymity(10)], sensitive=[LABEL], others="drop")
    mondrian = anon.mondrian("adult", partitioned, folder / "mondrian.parquet")
    made["mondrian"] = (mondrian.release.path, mondrian.release.report(folder / "mondrian.html", label=LABEL),
                        "adult")
    grouped = Policy(quasi_identifiers={"age": None, "hours-per-week": None}, models=[KAnonymity(5)],
                     sensitive=[LABEL], others="drop")
    clusters = anon.cluster("sample", grouped, MDAV())
    release = clusters.publish(folder / "clusters.duckdb")
    made["clustering"] = (release.path, release.report(folder / "clusters.html", label=LABEL,
                                                       sampling_fraction=0.05), "sample")
    perturbed = anon.perturb("adult", folder / "perturbed.duckdb", method=EmpiricalSynthesis(bins=20),
                             numeric=["age"], keep=[LABEL, "education"], seed=3)
    made["perturbation"] = (perturbed.path, perturbed.report(folder / "perturbed.html", label=LABEL), "adult")
    return made


def shown(rendered) -> dict[str, str]:
    return dict(FIGURE.findall(rendered.dom))


def number(text: str) -> float:
    return float(text)


def released_frame(path: Path) -> pd.DataFrame:
    info = read_release_info(path)
    con = duckdb.connect()
    if path.suffix == ".parquet":
        return con.sql(f"SELECT * FROM read_parquet('{path}')").df()
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    con.execute(f"ATTACH '{path}' AS r (READ_ONLY)")
    return con.sql(f'SELECT * FROM r."{info["released_table"]}"').df()


@pytest.mark.parametrize("kind", ["full-domain", "mondrian", "clustering", "perturbation"])
def test_report_renders_and_shows_the_right_figures(kind, reports, adult, browser, tmp_path):
    release_path, report_path, source_table = reports[kind]
    keep = os.environ.get("DUCKANON_REPORT_SCREENSHOTS")
    shots = Path(keep) if keep else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    desktop = browser.render(report_path, width=1280, height=900, screenshot=shots / f"{kind}-desktop.png")
    narrow = browser.render(report_path, width=390, height=844, screenshot=shots / f"{kind}-narrow.png")
    assert desktop.problems == [] and narrow.problems == []
    assert narrow.page_width <= 390, "the report scrolls sideways on a narrow screen"
    assert desktop.screenshot.stat().st_size > 10_000
    figures = shown(desktop)

    info = read_release_info(release_path)
    release = released_frame(release_path)
    source = adult.sql(f"SELECT * FROM {source_table}").df()
    assert int(figures["release.records"]) == len(release) == info["released_records"]
    assert int(figures["source.records"]) == len(source)
    assert int(figures["release.suppressed"]) == info["suppressed_records"]
    quasi = [c["column"] for c in (info["policy"] or {}).get("columns", []) if c["role"] == "quasi-identifier"]
    if not quasi:  # perturbed: distributions over the same bins, no class-based risk
        bins = Bins.covering(float(source["age"].min()), float(source["age"].max()))
        counts = [np.bincount(np.clip(np.floor((frame["age"].to_numpy(float) - bins.low) / bins.width).astype(int),
                                      0, bins.count - 1), minlength=bins.count) for frame in (source, release)]
        distance = 0.5 * np.abs(counts[0] / len(source) - counts[1] / len(release)).sum()
        assert number(figures["distribution.age.tv"]) == pytest.approx(distance, rel=1e-5)
        assert "Class-based risk does not apply" in desktop.text
        return
    sizes = release.groupby(quasi, dropna=False).size()
    assert number(figures["release.highest_risk"]) == pytest.approx(1 / sizes.min(), rel=1e-5)
    assert number(figures["release.average_risk"]) == pytest.approx(len(sizes) / len(release), rel=1e-5)
    assert int(figures["risk.classes.release"]) == len(sizes)
    source_sizes = source.groupby(quasi, dropna=False).size()
    assert int(figures["risk.classes.source"]) == len(source_sizes)
    assert int(figures["risk.sample uniques.source"]) == int((source_sizes == 1).sum())
    at_risk = int(sizes[1 / sizes > 0.2].sum())
    assert int(figures["risk.records at risk (prosecutor).release"]) == at_risk
    share_in_small = float(source_sizes[source_sizes <= 1].sum() / len(source))
    assert number(figures["class_sizes.1.source"]) == pytest.approx(share_in_small, rel=1e-5, abs=1e-12)
    assert {"logistic regression", "decision tree"} <= {key.split(".")[1] for key in figures
                                                        if key.startswith("accuracy.")}
    if kind == "full-domain":
        assert number(figures["frontier.5.metric"]) == pytest.approx(info["metrics"]["loss"], rel=1e-5)
        assert [k for k in (2, 5, 10, 50) if f"frontier.{k}.highest_risk" in figures] == [2, 5, 10, 50]
        assert number(figures["frontier.50.highest_risk"]) <= 1 / 50
        assert int(figures["transformation.height"]) == sum(info["transformation"]["full-domain generalization"]
                                                            .values())


def test_report_command_on_the_readme_release(folder, tmp_path):
    from duckanon.cli import run
    release = tmp_path / "adult_release.duckdb"
    assert run(["-o", str(release), "--quiet"]) == 0
    output = tmp_path / "adult_release.html"
    assert run(["report", str(release), "--adult", "--label", LABEL, "--sampling-fraction", "0.01",
                "--frontier", "2,5,10", "--quiet"]) == 0
    page = output.read_text()
    assert "Privacy and utility for each k" in page and "<script" not in page
    assert "http://" not in page.replace("http://www.w3.org", "")


def test_bad_input_is_one_clear_error_and_writes_nothing(anon, folder, tmp_path, reports, capsys):
    from duckanon.cli import main
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).execute("CREATE TABLE t AS SELECT 1 AS a").close()
    stripped = tmp_path / "stripped.duckdb"
    shutil.copy(reports["full-domain"][0], stripped)
    con = duckdb.connect(str(stripped))
    con.execute("DROP TABLE release_info")
    con.close()
    population = tmp_path / "population.csv"
    pd.DataFrame({q: ["x"] for q in QUASI}).to_csv(population, index=False)
    cases = [([str(plain)], "no readable release_info", 9),  # not a release: the code verify gives it too
             ([str(stripped)], "no readable release_info", 9),
             ([str(tmp_path / "nothing.duckdb")], "no such file", 2),
             ([str(reports["full-domain"][0]), "--adult", "--population", str(population)],
              "population \\(1 records\\) is smaller than the sample", 2),
             ([str(reports["full-domain"][0]), "--sampling-fraction", "1.5"], "1.5", 2)]
    for arguments, message, code in cases:
        output = tmp_path / "out.html"
        assert main(["report", *arguments, "-o", str(output), "--quiet"]) == code
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and re.search(message, error[0]), error
        assert not output.exists() and not list(tmp_path.glob(".out.html*"))
    with pytest.raises(AnonymizationError, match="must end in .html"):
        anon.report(reports["full-domain"][0], tmp_path / "report.txt")


def test_a_report_never_changes_a_release_and_its_tables_go_into_a_file_of_their_own(anon, tmp_path):
    # The released table is named like a report table: an earlier report took it for a stale one and dropped it.
    policy = Policy(quasi_identifiers=hierarchies(["sex", "age", "race"]), models=[KAnonymity(10)],
                    sensitive=[LABEL], others="drop", suppression_limit=0.01)
    result, release = anon.anonymize("sample", policy, tmp_path / "r.duckdb", table="report_people")
    parquet = anon.publish("sample", policy, result.levels, tmp_path / "r.parquet")
    csv = anon.publish("sample", policy, result.levels, tmp_path / "r.csv")
    written = {r.path: r.path.read_bytes() for r in (release, parquet, csv)}
    release.report(tmp_path / "r.html", sampling_fraction=0.5, frontier=[2, 10], tables=tmp_path / "figures.duckdb")
    for other in (parquet, csv):
        kind = other.path.suffix[1:]
        other.report(tmp_path / f"{kind}.html", tables=tmp_path / f"{kind}.duckdb")
    assert {path: path.read_bytes() for path in written} == written
    assert not (tmp_path / "r.duckdb.wal").exists()
    con = duckdb.connect(str(tmp_path / "figures.duckdb"), read_only=True)
    risk = con.sql("SELECT * FROM report_risk").df().set_index("measure")
    frontier_table = con.sql("SELECT * FROM report_frontier ORDER BY k").df()
    tables = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    con.close()
    people = released_frame(release.path)
    sizes = people.groupby(["sex", "age", "race"], dropna=False).size()
    assert risk.loc["highest prosecutor risk", "release"] == pytest.approx(1 / sizes.min())
    assert risk.loc["classes", "release"] == len(sizes)
    assert list(frontier_table["k"]) == [2, 10]
    assert tables == {"report_metrics", "report_risk", "report_population_uniqueness", "report_class_sizes",
                      "report_special_uniques", "report_frontier"}
    with pytest.raises(AnonymizationError, match="is the release"):
        release.report(tmp_path / "again.html", tables=release.path)
    assert release.path.read_bytes() == written[release.path]


def test_a_failed_report_leaves_no_file(anon, tmp_path, monkeypatch):
    from duckanon.report import tables as report_tables
    policy = Policy(quasi_identifiers=hierarchies(["sex", "race"]), models=[KAnonymity(5)], sensitive=[LABEL],
                    others="drop")
    _, release = anon.anonymize("sample", policy, tmp_path / "r.duckdb")
    before = release.path.read_bytes()

    def full_disk(figures, partial):
        partial.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_tables, "write_tables", full_disk)
    monkeypatch.setattr("duckanon.report.write_tables", full_disk)
    with pytest.raises(OSError, match="No space left"):
        release.report(tmp_path / "r.html", tables=tmp_path / "t.duckdb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb"]
    assert release.path.read_bytes() == before
    with pytest.raises(AnonymizationError, match="does not exist"):
        release.report(tmp_path / "missing" / "r.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb"]


def test_values_that_look_like_mathtext_are_drawn_as_written(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN '$$' ELSE '$x^2$' END AS q, i % 3 AS s "
                "FROM range(40) r(i)")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={"q": Hierarchy.from_lists([["$$", "*"], ["$x^2$", "*"]])},
                    models=[KAnonymity(5)], insensitive=["s"])
    release = anon.publish("t", policy, {"q": 0}, tmp_path / "m.duckdb")
    page = anon.report(release.path, tmp_path / "m.html", source="t").read_text()
    assert "$x^2$" in page


def test_journalist_risk_of_a_release_counts_its_classes_in_the_population(anon, adult, tmp_path):
    """The sample of 1,500 records is released; all of Adult is the population, recoded the same way with pandas."""
    quasi = ["sex", "age", "race", "education"]
    tree = hierarchies(quasi)
    policy = Policy(quasi_identifiers=tree, models=[KAnonymity(5)], sensitive=[LABEL], others="drop",
                    suppression_limit=0.03)
    result, release = anon.anonymize("sample", policy, tmp_path / "s.duckdb", table="people")
    release.report(tmp_path / "s.html", population="adult", tables=tmp_path / "figures.duckdb")
    con = duckdb.connect(str(tmp_path / "figures.duckdb"), read_only=True)
    risk = con.sql("SELECT * FROM report_risk").df().set_index("measure")
    con.close()
    people = released_frame(release.path)
    population = adult.sql("SELECT * FROM adult").df()
    maps = {q: {row[0]: row[result.levels[q]] for row in tree[q].rows} for q in quasi}
    recoded = pd.DataFrame({q: population[q].astype(str).map(maps[q]) for q in quasi})
    in_population = recoded.groupby(quasi).size()
    classes = people.groupby(quasi).size()
    starred = classes.index.map(lambda key: all(v == "*" for v in key))
    sizes_there = np.array([in_population[key] if not s else classes[key]
                            for key, s in zip(classes.index, starred)], dtype=float)
    measure = "highest journalist risk (population table)"
    assert risk.loc[measure, "release"] == pytest.approx(1 / sizes_there.min())
    assert risk.loc["records at risk (journalist, population table)", "release"] == int(
        classes.to_numpy()[1 / sizes_there > 0.2].sum())
    source_sizes = adult.sql("SELECT * FROM sample").df().groupby(quasi).size()
    population_sizes = population.groupby(quasi).size()
    assert risk.loc[measure, "source"] == pytest.approx(1 / population_sizes[source_sizes.index].min())


def test_without_the_report_extra_nothing_is_written(anon, tmp_path, monkeypatch):
    import builtins
    policy = Policy(quasi_identifiers=hierarchies(["sex", "race"]), models=[KAnonymity(5)], sensitive=[LABEL],
                    others="drop")
    _, release = anon.anonymize("sample", policy, tmp_path / "r.duckdb")
    before = release.path.read_bytes()
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r"`report` extra.*pip install .\.\[report\]"):
        release.report(tmp_path / "r.html")
    assert release.path.read_bytes() == before
    assert list(tmp_path.glob("*.html")) == [] and list(tmp_path.glob(".r.html*")) == []


@pytest.mark.parametrize("suffix", [".duckdb", ".parquet", ".csv"])
def test_a_report_shows_nothing_the_release_hides(suffix, tmp_path):
    """The issue's probe: a unique zip 98765 and age 97, whose record the release drops, and exact ages where the
    release shows decades.  The report's source side must show only the release's categories, small counts withheld;
    the custodian's view shows the values and says on the page that it is not to be passed on."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"zip": rng.choice(["10001", "10002", "10003"], 300), "age": rng.integers(30, 40, 300),
                          "illness": rng.choice(["flu", "cold"], 300)})
    frame.loc[len(frame)] = ["98765", 97, "flu"]
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={"zip": Hierarchy.redaction(frame["zip"].unique()),
                                       "age": Hierarchy.intervals(frame["age"].unique(), widths=[10, 100])},
                    models=[KAnonymity(5)], insensitive=["illness"], suppression="drop", suppression_limit=0.01)
    release = anon.publish("people", policy, {"zip": 0, "age": 1}, tmp_path / f"r{suffix}")
    assert release.suppressed == 1
    page = anon.report(release.path, tmp_path / "r.html", source="people", policy=policy).read_text()
    # What a reader sees: the text of the page and of its charts (their labels are SVG text), not styles or paths.
    seen = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.DOTALL)))
    assert "98765" not in page
    assert re.search(r"(?<![\d.,])97(?![\d.,])", seen) is None
    figures = collect(anon.workspace, release.path, source=sb.table("people"), policy=policy)
    released = released_frame(release.path)
    for comparison in figures.comparisons:  # every category shown is one the release shows (or a pooled one)
        assert set(comparison.original["value"]) <= set(released[comparison.attribute].astype(str)) | {
            NOT_SHOWN, MISSING, OTHERS}, comparison.attribute
    zips, ages = figures.comparisons
    assert list(zips.original["value"]) == ["10001", "10002", "10003", NOT_SHOWN]
    assert list(ages.original["value"]) == [*released["age"].unique(), NOT_SHOWN]  # one decade
    assert np.isnan(zips.original["records"].iloc[-1]) and np.isnan(ages.original["records"].iloc[-1])
    assert "Custodian" not in page and "withheld" in page
    custodian = anon.report(release.path, tmp_path / "c.html", source="people", policy=policy,
                            custodian_view=True).read_text()
    assert "98765" in custodian
    assert custodian.count("do not pass it on") >= 2 and "Custodian's report" in html.unescape(custodian)


def test_small_counts_are_withheld_with_a_complement():
    from duckanon.report.protected import withheld
    shown = withheld(np.array([0.0, 3, 40, 12, 7]), 5)
    assert list(np.isnan(shown)) == [False, True, False, False, True]  # 3 alone would follow from the total
    assert list(np.isnan(withheld(np.array([2.0, 3, 40]), 5))) == [True, True, False]
    assert not np.isnan(withheld(np.array([0.0, 5, 40]), 5)).any()


def test_the_verdict_is_recounted_from_the_file(anon, tmp_path):
    """A release edited after publishing (one record made unique): the verdict re-reads the rows and says k fails,
    naming as many violating classes as pandas counts; the untouched models and counts still hold."""
    policy = Policy(quasi_identifiers=hierarchies(["sex", "race"]), models=[KAnonymity(5)], sensitive=[LABEL],
                    others="drop")
    _, release = anon.anonymize("sample", policy, tmp_path / "r.duckdb", table="people")
    assert collect(anon.workspace, release.path).verdict["holds"].all()
    with duckdb.connect(str(release.path)) as con:
        con.execute("UPDATE people SET race = 'nowhere' WHERE rowid = (SELECT min(rowid) FROM people)")
    released = released_frame(release.path)
    sizes = released.groupby(["sex", "race"], dropna=False).size()
    verdict = collect(anon.workspace, release.path).verdict.set_index("guarantee")
    assert not verdict.loc["k-anonymity with k = 5", "holds"]
    classes, records = int((sizes < 5).sum()), int(sizes[sizes < 5].sum())
    assert verdict.loc["k-anonymity with k = 5", "recomputed"].startswith(
        f"{classes} {'class' if classes == 1 else 'classes'} ({records} {'record' if records == 1 else 'records'})")
    # The report says so first, above every figure.
    page = anon.report(release.path, tmp_path / "tampered.html").read_text()
    assert page.index("This release fails its verification") < page.index("<h2")
