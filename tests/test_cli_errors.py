"""Every failure of the command line is one line ``duckanon: error: …`` on stderr with a documented exit code, never
a traceback (issue 12, fault 7; the exit codes are listed in ``duckanon --help``)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from duckanon.cli import commands, exit_code, main, run
from duckanon.errors import AnonymizationError, PolicyNotSatisfied, ReleaseCheckFailed

SCRIPT = Path(sys.executable).with_name("duckanon")


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("duckanon: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize("argv, named", [
    (["--l-diversity", "salary-class"], "--l-diversity"),
    (["--levels", "age:2"], "--levels"),
    (["--entropy-l", "salary-class:nan"], "'nan'"),
    (["--entropy-l", "salary-class:inf"], "'inf'"),
    (["--t-closeness", "salary-class:x:ordered"], "--t-closeness"),
    (["--recursive-l", "salary-class:3"], "--recursive-l"),
    (["--suppression-limit", "1.5"], "--suppression-limit"),
    (["-k", "five"], "-k"),
    (["--metric", "nonsense"], "--metric"),
    (["cluster"], "--method"),
    (["run", "x.duckdb", "--policy", "p"], "--table"),
    (["hierarchy", "intervals", "x.csv", "--column", "age", "--widths", "5"], "--output"),
])
def test_bad_options_are_one_line_naming_the_option(argv, named, tmp_path, capsys):
    assert main(argv + ["-o", str(tmp_path / "x.duckdb")] if argv[0] not in ("run", "hierarchy", "cluster")
                else argv) == 2
    assert named in _one_error_line(capsys)
    assert not list(tmp_path.iterdir())


def test_output_that_is_a_directory_fails_before_any_work(tmp_path, capsys):
    out = io.StringIO()
    with pytest.raises(AnonymizationError, match="is a directory"):
        run(["-o", str(tmp_path)], out=out)
    assert out.getvalue() == ""  # nothing was searched
    assert main(["-o", str(tmp_path)]) == 2
    assert str(tmp_path) in _one_error_line(capsys)
    assert not list(tmp_path.iterdir())


def test_l_diversity_without_k_keeps_the_bundled_k(capsys):
    out = io.StringIO()
    levels = "sex=0,age=4,race=1,marital-status=2,education=3,native-country=2,workclass=2,occupation=2"
    assert run(["check", "--l-diversity", "salary-class:2", "--levels", levels], out=out) == 0
    policy = out.getvalue().splitlines()[0]
    assert policy.startswith("policy: k-anonymity(k=5); ") and "l-diversity" in policy, policy
    out = io.StringIO()
    assert run(["check", "-k", "3", "--l-diversity", "salary-class:2", "--levels", levels], out=out) == 0
    assert out.getvalue().splitlines()[0].startswith("policy: k-anonymity(k=3); ")


def _skewed_csv(path: Path) -> Path:
    """20 records whose whole table has entropy l < 2.5: no transformation can satisfy entropy 2.5-diversity."""
    pd.DataFrame({"zip": [f"4760{i % 4}" for i in range(20)],
                  "disease": ["flu"] * 18 + ["cold", "hiv"]}).to_csv(path, index=False)
    return path


def test_a_policy_nothing_satisfies_exits_1(tmp_path, capsys):
    source = _skewed_csv(tmp_path / "people.csv")
    hierarchy = tmp_path / "zip.csv"
    hierarchy.write_text("".join(f"4760{i};4760*;*\n" for i in range(4)))
    out = io.StringIO()
    argv = [str(source), "--qi", f"zip={hierarchy}", "--sensitive", "disease", "--entropy-l", "disease:2.5"]
    assert run(argv + ["-o", str(tmp_path / "r.duckdb")], out=out) == 1
    assert "no transformation satisfies the policy" in out.getvalue()
    assert not (tmp_path / "r.duckdb").exists()
    assert run(["check", *argv, "--levels", "zip=1"], out=io.StringIO()) == 1


def test_exit_codes_of_each_kind_of_failure():
    assert exit_code(PolicyNotSatisfied("k=5 cannot be met")) == 1
    assert exit_code(AnonymizationError("no table named 't'")) == 2
    assert exit_code(ValueError("bad value")) == 2
    assert exit_code(ReleaseCheckFailed("release check: 3 records written, 4 expected")) == 3
    assert exit_code(PermissionError(13, "Permission denied")) == 4
    assert exit_code(RuntimeError("a bug")) == 70
    assert exit_code(KeyboardInterrupt()) == 130


@pytest.mark.parametrize("raised, code, text", [
    (KeyboardInterrupt(), 130, "duckanon: error: interrupted"),
    (RuntimeError("boom\nsecond line"), 70, "duckanon: error: internal error (RuntimeError: boom second line)"),
    (ReleaseCheckFailed("release check: the written table violates the policy"), 3,
     "duckanon: error: release check: the written table violates the policy"),
])
def test_failures_inside_a_command_are_one_line(raised, code, text, monkeypatch, capsys):
    def fail(args, console):
        raise raised

    monkeypatch.setitem(commands.COMMANDS, "search", fail)
    assert main(["-k", "5"]) == code
    assert _one_error_line(capsys).startswith(text)


def test_a_file_that_is_no_database_exits_4(tmp_path, capsys):
    source = tmp_path / "people.duckdb"
    source.write_text("name,age\nann,30\n")
    assert main([str(source), "--table", "people", "--qi", "age", "-k", "2", "-o", str(tmp_path / "r.duckdb")]) == 4
    _one_error_line(capsys)
    assert source.read_text() == "name,age\nann,30\n"


def test_the_installed_script_reports_the_issues_failures_in_one_line(tmp_path):
    """Issue 12's four reproductions, through the real console script."""
    for argv in (["--l-diversity", "salary-class"], ["--levels", "age:2"], ["--entropy-l", "salary-class:nan"],
                 ["-o", str(tmp_path)]):
        done = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 2, (argv, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("duckanon: error: "), done.stderr
        assert done.stdout == ""
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ issue 24, item 8
def test_a_misspelled_command_names_the_closest_one(capsys):
    assert main(["serch", "-k", "5"]) == 2
    assert "'serch' is neither a command nor a file: did you mean 'search'?" in _one_error_line(capsys)
    assert main(["xyzzy"]) == 2
    assert "commands: search, check" in _one_error_line(capsys)


def test_a_missing_output_folder_is_an_error_before_any_work(tmp_path, capsys):
    out = io.StringIO()
    with pytest.raises(AnonymizationError, match="does not exist"):
        run(["-o", str(tmp_path / "missing" / "x.duckdb")], out=out)
    assert out.getvalue() == ""  # nothing was searched
    assert main(["-o", str(tmp_path / "missing" / "x.duckdb")]) == 2
    assert "does not exist" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, said", [("release_info", "is the name of the release's own"),
                                        ("", "give a non-empty name")])
def test_a_release_table_that_cannot_be_one_is_refused_before_any_work(name, said, tmp_path, capsys):
    out = io.StringIO()
    with pytest.raises(AnonymizationError, match=said):
        run(["-o", str(tmp_path / "x.duckdb"), "--release-table", name], out=out)
    assert out.getvalue() == "" and list(tmp_path.iterdir()) == []


def test_a_missing_extra_is_named_with_exit_2(monkeypatch, capsys):
    from duckanon.errors import MissingExtra
    from duckanon.report import plots

    def missing():
        raise MissingExtra("the report's plots need matplotlib, part of duckanon's `report` extra: "
                           "pip install 'duckanon[report]'")

    monkeypatch.setattr(plots, "require", missing)
    assert main(["report", "nothing.duckdb"]) in (2,)
    line = _one_error_line(capsys)
    assert "internal error" not in line


def test_sql_duckdb_rejects_is_an_internal_error_with_the_statement_in_the_debug_log(monkeypatch, capsys, caplog):
    from sqlglot import exp

    from duckanon.engine import duckdb_engine

    real = duckdb_engine.DuckDBEngine.prepare

    def broken(self, statement):
        if isinstance(statement, exp.Select) and "salary" in statement.sql():
            return real(self, statement) + " GARBAGE"
        return real(self, statement)

    monkeypatch.setattr(duckdb_engine.DuckDBEngine, "prepare", broken)
    monkeypatch.setenv("DUCKANON_DEBUG", "1")
    assert main(["check", "-q", "--levels", "sex=1,age=1,race=1,marital-status=1,education=1,native-country=1,"
                 "workclass=1,occupation=1"]) == 70
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("duckanon: error: internal error: DuckDB") and "please report it" in last
    logged = [r.getMessage() for r in caplog.records if r.name == "duckanon.sql"]
    assert any("rejected: SELECT" in m and "GARBAGE" in m for m in logged)  # the statement, in the debug log


def test_a_renamed_hierarchy_column_names_the_table_and_the_columns(tmp_path, capsys):
    import duckdb

    import duckanon
    from duckanon import Hierarchy
    from duckanon.datasets import adult_hierarchy_dir, load_adult
    source = tmp_path / "people.duckdb"
    with duckdb.connect(str(source)) as con:
        load_adult(con, "adult")
        duckanon.connect(con).add_hierarchy("sex", Hierarchy.from_arx_csv(adult_hierarchy_dir() / "sex.csv"))
        con.execute("ALTER TABLE anon.hierarchy_sex RENAME COLUMN level_1 TO top")
    assert main(["check", str(source), "--table", "adult", "--qi", "sex", "-k", "2", "--others", "drop",
                 "--levels", "sex=1", "-q"]) == 2
    line = _one_error_line(capsys)
    assert "'anon.hierarchy_sex' has columns ['level_0', 'top']" in line and "['level_0', 'level_1']" in line


def test_help_speaks_to_users_not_to_the_papers(capsys):
    for command in ([], ["cluster"], ["perturb"], ["check"], ["report"]):
        assert main([*command, "--help"]) == 0
        assert "seed 00" not in capsys.readouterr().out
