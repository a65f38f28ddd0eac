"""Regenerate ``duckanon/data/adult.csv.gz`` from the UCI Adult training file.

Usage::

    python tools/make_adult_bundle.py [SOURCE_CSV] [TARGET_GZ]

SOURCE_CSV defaults to /work/shared/data/adult/adult.data.csv (header row, values
separated by ", ", missing values "?"). The output is a comma-separated CSV with the
original header, every value stripped of whitespace, "?" written as an empty field
(so it loads as NULL), gzip-compressed with mtime 0 and no file name in the gzip
header, so the same input always gives byte-identical output.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from pathlib import Path

DEFAULT_SOURCE = Path("/work/shared/data/adult/adult.data.csv")
DEFAULT_TARGET = Path(__file__).resolve().parent.parent / "duckanon" / "data" / "adult.csv.gz"
EXPECTED_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary-class",
]
EXPECTED_RECORDS = 32561


def build(source: Path, target: Path) -> int:
    with open(source, newline="", encoding="utf-8") as f:
        rows = [[v.strip() for v in row] for row in csv.reader(f) if row]
    header, records = rows[0], rows[1:]
    if header != EXPECTED_COLUMNS:
        raise SystemExit(f"unexpected header: {header}")
    if len(records) != EXPECTED_RECORDS:
        raise SystemExit(f"expected {EXPECTED_RECORDS} records, found {len(records)}")
    for n, row in enumerate(records, start=2):
        if len(row) != len(header):
            raise SystemExit(f"line {n}: {len(row)} fields, expected {len(header)}")

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v == "?" else v for v in row] for row in records])
    payload = buf.getvalue().encode("utf-8")

    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as raw:
        # filename="" and mtime=0 keep the gzip header free of anything run-specific.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            gz.write(payload)
    return len(records)


def main(argv: list[str]) -> None:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    target = Path(argv[2]) if len(argv) > 2 else DEFAULT_TARGET
    n = build(source, target)
    print(f"wrote {n} records to {target} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    main(sys.argv)
