"""Columns released transformed (pseudonymize, mask, date_shift), held to independent computations: Python's hmac
for pseudonyms and date offsets, Python's re for masks, pandas for each person's shifted dates; the key in no byte of
a release, its info, its report, the progress log, the catalog or an error; bad declarations refused by name with
nothing written."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import DateShift, Hierarchy, KAnonymity, Mask, Policy, Pseudonymize
from duckanon.cli import run
from duckanon.engine.duckdb_engine import DuckDBEngine
from duckanon.errors import PolicyError, ReleaseCheckFailed
from duckanon.recode.protect import protected
from duckanon.release.files import read_release_info
from duckanon.sqlgen import build as sb

KEY_VARIABLE = "DUCKANON_TEST_PSEUDONYM_KEY"
WINDOW = 30
FORMATS = ["r.duckdb", "r.parquet", "r.csv"]


def visits(people: int = 150, seed: int = 27) -> pd.DataFrame:
    """Patients with 1 to 6 visits each: the person's id, name, e-mail and phone on every visit, age and zip as
    quasi-identifiers, the visit's date and admission time."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 7, people)
    person = np.repeat(np.arange(people), counts)
    n = len(person)
    first = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 700, people)[person], unit="D")
    later = pd.to_timedelta(np.concatenate([np.sort(rng.integers(0, 200, c)) for c in counts]), unit="D")
    seconds = pd.to_timedelta(rng.integers(0, 86_400, n), unit="s")
    domains = np.array(["example.org", "mail.example", "hospital.test"])
    return pd.DataFrame({
        "row": np.arange(n),
        "patient": person + 1000,
        "name": [f"Patient {p}" for p in person],
        "email": [f"p{p}.x@{domains[p % 3]}" for p in person],
        "phone": [f"+41 79 {p:03d} {p % 97:02d} {p % 89:02d}" for p in person],
        "age": rng.integers(20, 80, people)[person],
        "zip": rng.choice(["8001", "8002", "8003", "3001", "3002"], people)[person],
        "visit": (first + later).date,
        "admitted": (first + later + seconds).to_numpy(),
    })


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return visits()


@pytest.fixture
def anon(frame):
    con = duckdb.connect()
    con.register("visits_frame", frame)
    con.execute("CREATE TABLE visits AS SELECT * REPLACE (CAST(visit AS DATE) AS visit, "
                "CAST(admitted AS TIMESTAMP) AS admitted) FROM visits_frame")
    yield duckanon.connect(con)
    con.close()


@pytest.fixture
def key(monkeypatch) -> bytes:
    secret = secrets.token_hex(24)
    monkeypatch.setenv(KEY_VARIABLE, secret)
    return secret.encode()


def policy(frame: pd.DataFrame, key_source: str | None = f"env:{KEY_VARIABLE}", **changes) -> Policy:
    declared = {
        "quasi_identifiers": {"age": Hierarchy.intervals(frame["age"], widths=[10, 20, 40]),
                              "zip": Hierarchy.redaction(frame["zip"])},
        "models": [KAnonymity(4)], "identifiers": ["name"], "insensitive": ["row"], "suppression_limit": 0.05,
        "pseudonymize": {"patient": Pseudonymize(key_source)},
        "mask": {"email": Mask.email_domain(), "phone": Mask.keep_last(2)},
        "date_shift": {"visit": DateShift(WINDOW, "patient", key_source),
                       "admitted": DateShift(WINDOW, "patient", key_source)}}
    return Policy(**{**declared, **changes})


def released(path: Path, table: str = "release") -> pd.DataFrame:
    con = duckdb.connect()
    if path.suffix == ".duckdb":
        con.execute(f"ATTACH '{path}' AS r (READ_ONLY)")
        query = f'SELECT * FROM r."{table}"'
    elif path.suffix == ".parquet":
        query = f"SELECT * FROM read_parquet('{path}')"
    else:
        query = (f"SELECT * FROM read_csv('{path}', types={{'visit': 'DATE', 'admitted': 'TIMESTAMP', "
                 f"'patient': 'VARCHAR', 'phone': 'VARCHAR'}})")
    frame = con.execute(query + " ORDER BY row").df()
    con.close()
    return frame


def date_offset(key: bytes, person: object, days: int = WINDOW) -> int:
    """The documented draw: the first 32 bits of HMAC(HMAC(key, 'duckanon date shift'), person's text), modulo the
    window's 2·days + 1 values, less days."""
    derived = hmac.new(key, b"duckanon date shift", hashlib.sha256).digest()
    drawn = int(hmac.new(derived, str(person).encode(), hashlib.sha256).hexdigest()[:8], 16)
    return drawn % (2 * days + 1) - days


def masked(value: str | None, pattern: str, keep: tuple[int, ...], padding: str = "*") -> str | None:
    """Mask's definition, by Python's re."""
    if value is None:
        return None
    match = re.fullmatch(pattern, value)
    if match is None:
        return padding
    return "".join(match.group(g) if g in keep else padding for g in range(1, len(match.groups()) + 1))


def publish(anon, declared: Policy, path: Path, table: str = "release"):
    return anon.publish("visits", declared, {"age": 2, "zip": 1}, path, table=table)


@pytest.mark.parametrize("name", FORMATS)
def test_each_column_is_released_as_its_method_defines(anon, frame, key, tmp_path, name):
    publish(anon, policy(frame), tmp_path / name)
    out = released(tmp_path / name)
    source = frame.set_index("row").loc[out["row"]].reset_index()
    assert "name" not in out.columns
    assert list(out["patient"]) == [hmac.new(key, str(p).encode(), hashlib.sha256).hexdigest()
                                    for p in source["patient"]]
    assert list(out["email"]) == [masked(v, r"([^@]+)(@[^@]+)", (2,)) for v in source["email"]]
    assert list(out["phone"]) == [masked(v, r"(.+)(.{2})", (2,)) for v in source["phone"]]
    offsets = pd.to_timedelta([date_offset(key, p) for p in source["patient"]], unit="D")
    assert list(pd.to_datetime(out["visit"])) == list(pd.to_datetime(source["visit"]) + offsets)
    assert list(pd.to_datetime(out["admitted"])) == list(pd.to_datetime(source["admitted"]) + offsets)


def test_a_persons_dates_move_together_within_the_window_and_keep_their_intervals(anon, frame, key, tmp_path):
    publish(anon, policy(frame), tmp_path / "r.duckdb")
    out = released(tmp_path / "r.duckdb")
    source = frame.set_index("row").loc[out["row"]].reset_index()
    shift = (pd.to_datetime(out["visit"]) - pd.to_datetime(source["visit"])).dt.days
    per_person = shift.groupby(source["patient"]).agg(["min", "max"])
    assert (per_person["min"] == per_person["max"]).all()
    assert per_person["min"].abs().max() <= WINDOW
    assert per_person["min"].nunique() > 40  # 150 people over 61 offsets: the draw spreads them
    admitted = pd.to_datetime(out["admitted"]) - pd.to_datetime(source["admitted"])
    assert (admitted == pd.to_timedelta(shift, unit="D")).all()  # the time of day survives
    gaps = pd.DataFrame({"person": out["patient"], "visit": pd.to_datetime(out["visit"]),
                         "before": pd.to_datetime(source["visit"])}).sort_values(["person", "before"])
    assert (gaps.groupby("person")["visit"].diff().dropna() == gaps.groupby("person")["before"].diff().dropna()).all()
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_name = 'release'").fetchall())
    assert (types["visit"], types["admitted"], types["patient"]) == ("DATE", "TIMESTAMP", "VARCHAR")


def test_one_key_gives_one_pseudonym_and_another_key_or_none_gives_others(anon, frame, key, tmp_path, monkeypatch):
    publish(anon, policy(frame), tmp_path / "a.parquet")
    anon.publish("visits", policy(frame), {"age": 3, "zip": 1}, tmp_path / "b.parquet")
    a, b = released(tmp_path / "a.parquet"), released(tmp_path / "b.parquet")
    assert list(a["patient"]) == list(b["patient"]) and list(a["visit"]) == list(b["visit"])
    monkeypatch.setenv(KEY_VARIABLE, secrets.token_hex(24))
    publish(anon, policy(frame), tmp_path / "c.parquet")
    c = released(tmp_path / "c.parquet")
    assert not set(a["patient"]) & set(c["patient"])
    for name in ("d.parquet", "e.parquet"):
        publish(anon, policy(frame, key_source=None), tmp_path / name)
    d, e = released(tmp_path / "d.parquet"), released(tmp_path / "e.parquet")
    assert not set(d["patient"]) & set(e["patient"]) and not set(d["patient"]) & set(a["patient"])
    # Within one release, one person has one pseudonym and one offset: the random key is the release's.
    assert d.groupby("patient")["row"].count().sort_values().tolist() == \
        frame.groupby("patient")["row"].count().sort_values().tolist()


def test_a_key_file_is_read_without_its_trailing_line_break(anon, frame, tmp_path):
    secret = secrets.token_hex(20).encode()
    (tmp_path / "key").write_bytes(secret + b"\n")
    publish(anon, policy(frame, key_source=f"file:{tmp_path / 'key'}"), tmp_path / "r.parquet")
    out = released(tmp_path / "r.parquet")
    first = frame.set_index("row").loc[out["row"].iloc[0], "patient"]
    assert out["patient"].iloc[0] == hmac.new(secret, str(first).encode(), hashlib.sha256).hexdigest()


def _key_forms(key: bytes) -> list[bytes]:
    padded = key.ljust(64, b"\0")
    inner, outer = bytes(b ^ 0x36 for b in padded), bytes(b ^ 0x5C for b in padded)
    derived = hmac.new(key, b"duckanon date shift", hashlib.sha256).digest()
    return [key, key.hex().encode(), inner, outer, inner.hex().encode(), outer.hex().encode(), derived,
            derived.hex().encode()]


def _holds_no_key(data: bytes, key: bytes) -> bool:
    return not any(form in data for form in _key_forms(key))


@pytest.mark.parametrize("name", FORMATS)
def test_the_key_is_in_no_byte_of_a_release_its_info_report_log_catalog_or_error(anon, frame, key, tmp_path, name,
                                                                                 caplog, monkeypatch):
    messages: list[str] = []
    anon.progress = messages.append
    caplog.set_level(logging.DEBUG)
    release = publish(anon, policy(frame), tmp_path / name)
    anon.save_policy("transformed", policy(frame))
    report = anon.report(release, tmp_path / "report.html", tables=tmp_path / "report.duckdb")
    anon.con.execute("CHECKPOINT")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {name, "report.html", "report.duckdb"}
    for path in written:
        assert _holds_no_key(path.read_bytes(), key), path.name
    info = json.dumps(read_release_info(tmp_path / name), default=str).encode()
    assert _holds_no_key(info, key) and b"env:" + KEY_VARIABLE.encode() in info
    assert _holds_no_key("\n".join(messages + [r.getMessage() for r in caplog.records]).encode(), key)
    stored = anon.con.execute("SELECT * FROM anon.policy_methods").fetchall()
    assert _holds_no_key(repr(stored).encode(), key) and report.exists()

    def broken(*args, **kwargs):
        raise ReleaseCheckFailed("release check: made to fail")

    monkeypatch.setattr("duckanon.release.publish.verify_release", broken)
    with pytest.raises(ReleaseCheckFailed) as failure:
        publish(anon, policy(frame), tmp_path / f"failed-{name}")
    shown = [str(failure.getrepr(chain=True)), repr(failure.value), repr(failure.value.__cause__),
             repr(failure.value.__context__)]
    assert _holds_no_key("\n".join(shown).encode(), key)


def test_release_info_and_report_name_each_columns_role_and_method(anon, frame, key, tmp_path):
    release = publish(anon, policy(frame), tmp_path / "r.duckdb")
    columns = {c["column"]: c for c in read_release_info(tmp_path / "r.duckdb")["policy"]["columns"]}
    assert {c: columns[c]["role"] for c in ("patient", "email", "visit", "name", "age")} == {
        "patient": "pseudonymize", "email": "mask", "visit": "date-shift", "name": "identifier",
        "age": "quasi-identifier"}
    assert columns["patient"]["method"] == {"method": "HMAC-SHA-256", "key": f"env:{KEY_VARIABLE}"}
    assert columns["email"]["method"] == {"pattern": "([^@]+)(@[^@]+)", "keep": [2], "padding": "*"}
    assert columns["visit"]["method"] == {"days": WINDOW, "by": "patient", "key": f"env:{KEY_VARIABLE}"}
    page = release.report(tmp_path / "r.html").read_text()
    assert "keyed HMAC-SHA-256" in page and "±30 days" in page


def test_stored_policies_keep_their_methods(anon, frame, key):
    declared = policy(frame)
    anon.save_policy("transformed", declared)
    assert anon.policy("transformed") == declared
    plain = policy(frame, key_source=None, pseudonymize=["patient"], mask={}, date_shift={}, others="drop")
    anon.save_policy("plain", plain)
    assert anon.policy("plain").methods == {"patient": Pseudonymize()}


def test_mondrian_releases_the_columns_transformed_too(anon, frame, key, tmp_path):
    declared = policy(frame, quasi_identifiers={"age": None, "zip": Hierarchy.redaction(frame["zip"])})
    anon.mondrian("visits", declared, tmp_path / "m.parquet")
    out = released(tmp_path / "m.parquet")
    source = frame.set_index("row").loc[out["row"]].reset_index()
    assert list(out["patient"]) == [hmac.new(key, str(p).encode(), hashlib.sha256).hexdigest()
                                    for p in source["patient"]]
    assert list(out["email"]) == [masked(v, r"([^@]+)(@[^@]+)", (2,)) for v in source["email"]]


def test_the_command_line_declares_every_method(anon, frame, key, tmp_path):
    source = tmp_path / "visits.parquet"
    anon.con.execute(f"COPY visits TO '{source}'")
    hierarchies = tmp_path / "hierarchies"
    hierarchies.mkdir()
    for column, built in policy(frame).quasi_identifiers.items():
        built.to_arx_csv(hierarchies / f"{column}.csv")
    target = tmp_path / "r.parquet"
    code = run([str(source), "--qi", "age", "--qi", "zip", "--hierarchies", str(hierarchies), "-k", "4",
                "--suppression-limit", "0.05", "--identifier", "name", "--insensitive", "row",
                "--pseudonymize", "patient", "--mask", "email=email-domain", "--mask", "phone=regex:(.+)(.{2}):2",
                "--date-shift", "visit=30:patient", "--date-shift", "admitted=30:patient",
                "--pseudonym-key", f"env:{KEY_VARIABLE}", "-o", str(target)])
    assert code == 0
    out = released(target)
    source_rows = frame.set_index("row").loc[out["row"]].reset_index()
    assert list(out["patient"]) == [hmac.new(key, str(p).encode(), hashlib.sha256).hexdigest()
                                    for p in source_rows["patient"]]
    assert list(out["phone"]) == [masked(v, r"(.+)(.{2})", (2,)) for v in source_rows["phone"]]
    offsets = pd.to_timedelta([date_offset(key, p) for p in source_rows["patient"]], unit="D")
    assert list(pd.to_datetime(out["visit"])) == list(pd.to_datetime(source_rows["visit"]) + offsets)


def changed(frame: pd.DataFrame, **methods) -> Policy:
    """The test's policy with some columns' methods replaced."""
    declared = policy(frame)
    kept = {role: {c: m for c, m in getattr(declared, role).items()
                   if not any(c in given for given in methods.values())} for role in ("mask", "date_shift")}
    return policy(frame, **{role: {**kept[role], **methods.get(role, {})} for role in kept})


BAD_DECLARATIONS = [
    (lambda f: policy(f, key_source="env:DUCKANON_TEST_UNSET_KEY"), "DUCKANON_TEST_UNSET_KEY", "not set"),
    (lambda f: policy(f, key_source="file:/nonexistent/key"), "/nonexistent/key", "cannot be read"),
    (lambda f: policy(f, key_source="vault:x"), "env:NAME", "vault:x"),
    (lambda f: policy(f, mask={"email": Mask(r"(.*)(@.*)", (1, 2))}), "(.*)(@.*)", "whole value"),
    (lambda f: changed(f, mask={"email": Mask(r"(\d*)(.*)", (2,))}), "'email'", "keep 516 values whole"),
    (lambda f: policy(f, mask={"email": Mask(r"(.*)", (2,))}), "keep must name groups", "1 to 1"),
    (lambda f: changed(f, date_shift={"visit": DateShift(WINDOW, "person")}), "'person'", "does not have"),
    (lambda f: changed(f, mask={"phone": Mask.keep_last(2)}, date_shift={"email": DateShift(WINDOW, "patient")}),
     "'email'", "not a date"),
    (lambda f: policy(f, date_shift={"visit": DateShift(0, "patient")}), "DateShift: days must", "got 0"),
    (lambda f: changed(f, date_shift={"visit": DateShift(WINDOW, "age")}), "'age'", "quasi-identifier"),
    (lambda f: policy(f, pseudonymize="patient"), "pseudonymize", "single string"),
    (lambda f: policy(f, pseudonymize={"zip": Pseudonymize()}), "'zip'", "two roles"),
]


@pytest.mark.parametrize("build,names,says", BAD_DECLARATIONS, ids=[str(i) for i in range(len(BAD_DECLARATIONS))])
def test_a_bad_declaration_is_one_error_naming_it_and_nothing_is_written(anon, frame, key, tmp_path, build, names,
                                                                          says):
    publish(anon, policy(frame), tmp_path / "r.parquet")
    before = (tmp_path / "r.parquet").read_bytes()
    with pytest.raises(PolicyError) as error:
        publish(anon, build(frame), tmp_path / "r.parquet")
    assert names in str(error.value) and says in str(error.value)
    assert (tmp_path / "r.parquet").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]


def test_a_short_key_is_refused_naming_its_source_and_length_never_the_key(anon, frame, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "too short a secret")
    with pytest.raises(PolicyError) as error:
        publish(anon, policy(frame), tmp_path / "r.parquet")
    assert str(error.value) == (f"the pseudonym key from 'env:{KEY_VARIABLE}' has 18 bytes; at least 32 are needed "
                                f"(e.g. `openssl rand -hex 32`)")
    assert list(tmp_path.iterdir()) == []


def test_a_date_shift_whose_person_is_missing_is_refused(anon, frame, key, tmp_path):
    anon.con.execute("UPDATE visits SET patient = NULL WHERE row < 3")
    with pytest.raises(PolicyError, match="'patient', which is NULL in 3 records"):
        publish(anon, policy(frame, pseudonymize={}, insensitive=["row", "patient"]), tmp_path / "r.parquet")
    assert list(tmp_path.iterdir()) == []


TEXTS = st.one_of(st.none(), st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
                                     max_size=24))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(TEXTS, min_size=1, max_size=12), last=st.integers(1, 5), first=st.integers(1, 3))
def test_pseudonyms_and_masks_of_any_text_equal_pythons(values, last, first):
    """Any UTF-8 text (quotes, backslashes, line breaks, emoji): SQL's HMAC equals Python's, each mask re's."""
    con = duckdb.connect()
    con.register("texts", pd.DataFrame({"v": pd.Series(values, dtype=object),
                                        "w": pd.Series(values, dtype=object),
                                        "f": pd.Series(values, dtype=object),
                                        "i": range(len(values))}))
    secret = secrets.token_hex(20) + "ünï"  # its UTF-8 is the key
    engine = DuckDBEngine(con)
    os.environ[KEY_VARIABLE + "_H"] = secret
    methods = {"v": Pseudonymize(f"env:{KEY_VARIABLE}_H"), "w": Mask.keep_last(last), "f": Mask.keep_first(first)}
    try:
        with protected(engine, sb.table("texts"), ["v", "w", "f", "i"], methods) as query:
            rows = engine.rows(query.order_by(sb.col("i")))
    finally:
        del os.environ[KEY_VARIABLE + "_H"]
    key = secret.encode("utf-8")
    assert [r[0] for r in rows] == [None if v is None else hmac.new(key, v.encode(), hashlib.sha256).hexdigest()
                                    for v in values]
    assert [r[1] for r in rows] == [masked(v, rf"(.+)(.{{{last}}})", (2,)) for v in values]
    assert [r[2] for r in rows] == [masked(v, rf"(.{{{first}}})(.+)", (1,)) for v in values]


def test_keys_longer_than_a_block_are_hashed_first_as_hmac_defines(anon, frame, tmp_path, monkeypatch):
    long_key = secrets.token_hex(50)  # 100 bytes
    monkeypatch.setenv(KEY_VARIABLE, long_key)
    publish(anon, policy(frame), tmp_path / "r.parquet")
    out = released(tmp_path / "r.parquet")
    first = frame.set_index("row").loc[out["row"].iloc[0], "patient"]
    assert out["patient"].iloc[0] == hmac.new(long_key.encode(), str(first).encode(), hashlib.sha256).hexdigest()


def test_a_date_shift_that_would_lose_nanoseconds_is_refused(anon, frame, key, tmp_path):
    anon.con.execute("ALTER TABLE visits ALTER admitted TYPE TIMESTAMP_NS")
    with pytest.raises(PolicyError, match="'admitted' is TIMESTAMP_NS"):
        publish(anon, policy(frame), tmp_path / "r.parquet")
    assert list(tmp_path.iterdir()) == []
