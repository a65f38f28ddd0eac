"""Risk record by record: SUDA2 and the individual risk on Adult and IHIS, and sdcMicro's documented values.

    python benchmarks/bench_record_risk.py
    python benchmarks/bench_record_risk.py --sdcmicro-testdata PATH/testdata2.RData   # sdcMicro's data/ file too

Per data set and measure, in a process of its own: the records, the distinct key combinations, the seconds of the
call (DuckDB reading the source into its combinations, then NumPy), peak RSS, and what it found (records with MSUs,
the highest score, the most common set of variables records are unique on; expected re-identifications and global
risk).  Adult: the README main job's eight quasi-identifiers, ``fnlwgt`` as the sampling weight; IHIS: its nine, no
weight (its synthetic records carry none).  sdcMicro cannot run here (no R), so its figures are the expected values its
own tests state (``tests/testthat/test_suda2.R``, on its ``testdata2``), recomputed by duckanon from the same file
when ``--sdcmicro-testdata`` names it (``data/testdata2.RData`` of sdcTools/sdcMicro; ``pyreadr`` reads it).  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import common
import duckdb
from bench_search import IHIS_QIS, ihis_file

import duckanon
from duckanon.datasets import load_adult

ADULT_KEYS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
CASES = {
    ("adult", "suda2, sets of at most 4"): {"max_size": 4},
    ("adult", "suda2, all sets"): {"max_size": None},
    ("adult", "individual risk, fnlwgt"): {"weight": "fnlwgt"},
    ("ihis", "suda2, sets of at most 4"): {"max_size": 4},
    ("ihis", "suda2, all sets"): {"max_size": None},
    ("ihis", "individual risk, no weight"): {"weight": None},
}
# sdcMicro's tests/testthat/test_suda2.R on testdata2: the first record's score.
SDCMICRO_SUDA = [
    (["urbrur", "roof", "walls", "water", "sex"], True, 2.0),
    (["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"], True, 180.0),
    (["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"], False, 2.73),
]


def child(data: str, measure: str, data_dir: Path, out: Path) -> None:
    con = duckdb.connect()
    if data == "adult":
        load_adult(con, "t")
        keys = ADULT_KEYS
    else:
        con.execute("CREATE TABLE t AS SELECT * FROM read_csv(?, delim=';', header=true)", [str(ihis_file(data_dir))])
        keys = IHIS_QIS
    anon = duckanon.connect(con)
    records = con.execute("SELECT COUNT(*) FROM t").fetchall()[0][0]
    quoted = ", ".join(f'"{k}"' for k in keys)
    distinct = con.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT {quoted} FROM t)").fetchall()[0][0]
    settings = CASES[(data, measure)]
    common.reset_peak_rss()
    started = time.perf_counter()
    if "weight" in settings:
        risk = anon.individual_risk("t", keys, weight=settings["weight"])
        found = f"{risk.expected_reidentifications:,.1f} expected re-identifications, global risk {risk.global_risk:.3%}"
    else:
        suda = anon.suda2("t", keys, max_size=settings["max_size"])
        scored = int((suda.combinations["score"] > 0).sum())
        found = (f"{scored:,} with MSUs, highest score {suda.combinations['score'].max():g}; "
                 f"{suda.why(1)[0] if scored else 'none unique'}")
    seconds = time.perf_counter() - started
    out.write_text(json.dumps({"records": records, "distinct": distinct, "seconds": seconds,
                               "peak_rss_mb": common.peak_rss_mb(), "found": found}))


def sdcmicro_rows(path: Path) -> list[list[str]]:
    import pyreadr

    frame = pyreadr.read_r(str(path))["testdata2"]
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    rows = []
    for keys, original, expected in SDCMICRO_SUDA:
        suda = anon.suda2("t", keys, original_scores=original)
        first = frame[keys].head(1).merge(suda.combinations, on=keys)["score"].iloc[0]
        rows.append([f"testdata2, {len(keys)} keys, {'original' if original else 'IHSN'} scores", f"{expected:g}",
                     f"{round(first, 2):g}", "yes" if round(first, 2) == expected else "NO"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--sdcmicro-testdata", type=Path, help="sdcMicro's data/testdata2.RData")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "record_risk.md")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.data_dir, args.child_output)
        return 0
    load = common.load_at_start()
    rows, results = [], []
    for data, measure in CASES:
        common.progress(f"{data}: {measure}")
        out = args.data_dir / "record-risk.json"
        measured = common.run_measured([sys.executable, str(Path(__file__).resolve()), "--child", data, measure,
                                        "--data-dir", str(args.data_dir), "--child-output", str(out)])
        if measured.returncode != 0:
            raise RuntimeError(f"{data}, {measure} failed")
        result = json.loads(out.read_text())
        results.append({"data": data, "measure": measure, **result})
        rows.append([data, measure, f"{result['records']:,}", f"{result['distinct']:,}", f"{result['seconds']:.2f}",
                     f"{result['peak_rss_mb']:.0f}", result["found"]])
    table = common.markdown_table(["data", "measure", "records", "distinct keys", "s", "peak RSS MB", "found"], rows)
    note = "- Each call reads the source into its distinct key combinations in DuckDB, then measures them in NumPy."
    if args.sdcmicro_testdata is not None:
        table += "\n\n" + common.markdown_table(["sdcMicro's test", "its expected score of record 1", "duckanon",
                                                 "equal"], sdcmicro_rows(args.sdcmicro_testdata))
    common.report("Risk record by record", "python benchmarks/bench_record_risk.py", table, note, results, load,
                  args.output, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
