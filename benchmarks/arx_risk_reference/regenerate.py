"""Regenerate ``tests/data/arx_risk_reference.json``: ARX 3.9.2's re-identification risk estimates, the reference
``tests/test_risk_estimators.py`` checks ``duckanon/risk/population.py`` against.

    python benchmarks/arx_risk_reference/regenerate.py                      # ARX from ../shared/peers/arx
    python benchmarks/arx_risk_reference/regenerate.py --arx /path/to/arx --output /tmp/reference.json

``--arx`` is a folder holding ``arx-3.9.2-core.jar`` and its dependencies in ``lib/*.jar``; ``javac`` and ``java``
(17) must be on the PATH.  The script writes the 30,162 complete records of the bundled Adult data
(``duckanon/data/adult.csv.gz``, rows with a missing value dropped, as the ARX driver's ``prep_adult.py`` does) to a
temporary folder, compiles ``ArxRiskReference.java`` there, feeds it the cases below and stores its answers with each
case's class-size histogram (or, for journalist risk, its sample/population class-size pairs), so the tests need
neither ARX nor the data.  It takes under a minute, and gives the same file every time.

The cases: Adult over quasi-identifier sets from two attributes (no sample uniques) to eight (most records unique),
each under sampling fractions 0.01, 0.1, 0.5, 0.9 and ARX's USA region; one-column data sets made from a histogram,
chosen so that every branch of Dankar et al.'s rule is taken (Pitman's estimate; Zayatz's when Pitman's fit finds no
root or no estimate in [0, N]; Zayatz's or SNB's, whichever is smaller; Zayatz's when SNB's fit fails; no uniques)
and the solver's paths (Pitman's closed-form equations failing and the term-by-term ones holding); and journalist risk
of every 10th Adult record within all of them (four quasi-identifier sets).  ARX's solver stops after 100 ms per try
and 1 s in all; an estimate that took longer than 100 ms is reported, as the clock, not the method, may have decided
it.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADULT = ROOT / "duckanon" / "data" / "adult.csv.gz"
OUTPUT = ROOT / "tests" / "data" / "arx_risk_reference.json"
COMMAND = "python benchmarks/arx_risk_reference/regenerate.py"

POPULATIONS = ["fraction:0.01", "fraction:0.1", "fraction:0.5", "fraction:0.9", "region:USA"]
THRESHOLDS = [0.05, 0.1, 0.2, 0.5]
ADULT_QUASI_IDENTIFIERS = [
    ["sex", "race"],
    ["age", "sex"],
    ["age", "sex", "race"],
    ["age", "education", "marital-status", "sex"],
    ["age", "workclass", "education", "marital-status", "occupation", "race", "sex", "native-country"],
]
# histogram -> sampling fractions, each chosen for the branch of Dankar's rule (or the solver's path) it takes
HISTOGRAMS = {
    "1x50,2x20,3x10,5x5,10x2": POPULATIONS[:4],   # Pitman (0.01, 0.1); Zayatz as SNB's fit fails (0.5); SNB (0.9)
    "1x71,2x10": ["fraction:0.99"],                 # Zayatz, smaller than an applicable SNB estimate
    "1x48,10x4": ["fraction:0.05"],                 # Pitman's fit finds no root: Zayatz
    "1x30,2x10": ["fraction:0.05"],                 # Pitman's root gives no estimate in [0, N]: Zayatz
    "1x2,3x4,7x1": ["fraction:0.1"],                # Pitman's closed-form fit fails, the term-by-term one holds
    "1x10": ["fraction:0.01", "fraction:0.5"],      # every record unique
    "1x1,2x2": ["fraction:0.4"],                    # N = round(5 / 0.4) = 13: halves round up
    "1x5,2x40,3x20,4x10": ["fraction:1"],           # the sample is the population
    "2x10,3x5": ["fraction:0.1", "fraction:0.5"],   # no uniques: every estimate 0
}
JOURNALIST_EVERY = 10


def write_adult(path: Path) -> int:
    with gzip.open(ADULT, "rt", newline="") as source, path.open("w", newline="") as target:
        reader, writer = csv.reader(source), csv.writer(target, lineterminator="\n")
        writer.writerow(next(reader))
        kept = 0
        for row in reader:
            if row and "" not in row:  # the bundled file has "" where UCI's has "?"
                writer.writerow(row)
                kept += 1
    return kept


def cases(adult: Path) -> list[str]:
    lines = []
    for quasi in ADULT_QUASI_IDENTIFIERS:
        lines.append("\t".join(["sample", f"adult: {', '.join(quasi)}", f"csv:{adult}", ",".join(quasi),
                                ",".join(POPULATIONS), ",".join(map(str, THRESHOLDS))]))
    for histogram, populations in HISTOGRAMS.items():
        lines.append("\t".join(["sample", f"histogram {histogram}", f"histogram:{histogram}", "class",
                                ",".join(populations), ",".join(map(str, THRESHOLDS))]))
    for quasi in ADULT_QUASI_IDENTIFIERS[1:]:
        lines.append("\t".join(["journalist", f"adult every {JOURNALIST_EVERY}th record: {', '.join(quasi)}",
                                str(adult), ",".join(quasi), str(JOURNALIST_EVERY), ",".join(map(str, THRESHOLDS))]))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arx", type=Path, default=ROOT.parent / "shared" / "peers" / "arx",
                        help="folder with arx-3.9.2-core.jar and lib/*.jar")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    classpath = f"{args.arx / 'arx-3.9.2-core.jar'}:{args.arx / 'lib'}/*"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        adult = work / "adult.csv"
        records = write_adult(adult)
        subprocess.run(["javac", "-cp", classpath, "-d", str(work / "classes"), str(HERE / "ArxRiskReference.java")],
                       check=True)
        run = subprocess.run(["java", "-cp", f"{work / 'classes'}:{classpath}", "ArxRiskReference"],
                             input="\n".join(cases(adult)) + "\n", stdout=subprocess.PIPE, text=True, check=True)
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    for answer in answers:
        answer.pop("source", None)  # the temporary CSV's path, or the histogram spelled again
        for population in answer.get("populations", []):
            elapsed = population.pop("elapsed_ms")  # kept out of the file, which then changes only with ARX's answers
            if elapsed > 100:
                print(f"{answer['name']}, {population['population']}: took {elapsed} ms, beyond ARX's 100 ms per "
                      f"solver try", file=sys.stderr)
    header = {
        "about": "ARX 3.9.2's re-identification risk estimates (org.deidentifier.arx.risk), the reference for "
                 "duckanon/risk/population.py; see benchmarks/arx_risk_reference/",
        "command": COMMAND,
        "arx": "arx-3.9.2-core.jar, default ARXSolverConfiguration",
        "java": java,
        "adult_records": records,
    }
    lines = [json.dumps(header, indent=1)[:-2] + ","]  # the header's fields, then one case per line
    for key, kind in (("samples", "sample"), ("journalist", "journalist")):
        cases_of_kind = [json.dumps(a, separators=(",", ":")) for a in answers if a["kind"] == kind]
        lines.append(f' "{key}": [\n  ' + ",\n  ".join(cases_of_kind) + "\n ]" + ("," if kind == "sample" else ""))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"{len(answers)} cases written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
