"""Transcribe ARX's test cases on Adult: its anonymization cases into ``adult_cases.json`` (the yardstick's data) and
its utility-metric cases into ``tests/data/arx_utility_metrics.json`` (the metric values ARX expects per node).

    python benchmarks/arx_cases/transcribe.py PATH/TO/arx      # a checkout of github.com/arx-deidentifier/arx

ARX's tests (``src/test/org/deidentifier/arx/test/TestAnonymization*.java`` and ``TestUtilityMetricsLoss.java``) list
each case as a Java expression: a configuration (suppression limit, quality metric, privacy models), the sensitive
attribute, the data set, the expected optimum and its information loss; ``TestUtilityMetrics.java`` lists per
configuration the information loss ARX computes for some transformations.  This reads those expressions with a small
parser of the Java they use (constructors, static and chained calls, literals, array initializers) and writes every
case on ``./data/adult.csv`` as plain data: nothing of ARX's is run or kept but the values, and the research subset
its δ-presence and k-map cases name (``data/adult_subset.csv``, 3,016 of Adult's records, kept gzipped as
``adult_subset.csv.gz``).  The cases and the subset come from ARX under the Apache License 2.0 (``LICENSE-ARX``
beside this file).
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = "src/test/org/deidentifier/arx/test"
SUITES = re.compile(r"TestAnonymization\w*\.java|TestUtilityMetricsLoss\.java")
ADULT = "./data/adult.csv"
SUBSET = "data/adult_subset.csv"

TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\])*")
  | (?P<char>'(?:\\.|[^'\\])')
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[dDfFlL]?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<punct>[(){}\[\],.;])
""", re.VERBOSE | re.DOTALL)


def tokens(text: str) -> Iterator[tuple[str, str]]:
    """(kind, text) of each token, read as the parser asks: the code after the case list is not this parser's Java."""
    position = 0
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read Java at {text[position:position + 40]!r}")
        position = match.end()
        if match.lastgroup != "space":
            yield match.lastgroup, match.group()


class Parser:
    """Recursive descent over the expressions ARX's case lists use; values come out as JSON-ready data:
    numbers, strings, booleans, None, lists (array initializers), ``{"new": T, "args": […]}``,
    ``{"call": "A.b", "args": […]}`` (static or helper calls), ``{"call": m, "on": receiver, "args": […]}``
    (chained calls) and ``{"const": "A.B"}``."""

    def __init__(self, text: str):
        self.stream, self.tokens, self.position = tokens(text), [], 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.position + offset
        while len(self.tokens) <= index:
            self.tokens.append(next(self.stream, ("end", "")))
        return self.tokens[index]

    def take(self, expected: str | None = None) -> str:
        text = self.peek()[1]
        if expected is not None and text != expected:
            raise ValueError(f"expected {expected!r}, found {text!r} near token {self.position}")
        self.position += 1
        return text

    def arguments(self, close: str = ")") -> list:
        values = []
        while self.peek()[1] != close:
            values.append(self.expression())
            if self.peek()[1] == ",":
                self.take(",")
        self.take(close)
        return values

    def expression(self):
        value = self.primary()
        while self.peek()[1] == ".":
            self.take(".")
            member = self.take()
            if self.peek()[1] == "(":
                self.take("(")
                value = {"call": member, "on": value, "args": self.arguments()}
            else:
                value = {"const": f"{value['const']}.{member}"} if isinstance(value, dict) and "const" in value \
                    else {"field": member, "on": value}
        return value

    def primary(self):
        kind, text = self.peek()
        if kind == "number":
            self.take()
            digits = text.rstrip("dDfFlL")
            return float(digits) if any(c in digits for c in ".eE") or text[-1] in "dDfF" else int(digits)
        if kind == "string":
            self.take()
            return json.loads(text)
        if kind == "char":
            self.take()
            return text[1:-1]
        if text == "(":
            self.take("(")
            value = self.expression()
            self.take(")")
            return value
        if text == "{":
            self.take("{")
            return self.arguments("}")
        if text == "new":
            self.take("new")
            name = self.take()
            while self.peek()[1] == ".":  # a qualified type
                self.take(".")
                name += "." + self.take()
            if self.peek()[1] == "[":
                while self.peek()[1] in "[]":
                    self.take()
                self.take("{")
                return self.arguments("}")
            self.take("(")
            return {"new": name, "args": self.arguments()}
        if kind == "name":
            self.take()
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            if self.peek()[1] == "(":
                self.take("(")
                return {"call": text, "args": self.arguments()}
            if self.peek()[1] == "." and self.peek(2)[1] == "(":  # A.b(…): a static call
                self.take(".")
                member = self.take()
                self.take("(")
                return {"call": f"{text}.{member}", "args": self.arguments()}
            return {"const": text}
        raise ValueError(f"unexpected {text!r} near token {self.position}")


def case_rows(text: str) -> list:
    """The rows of the ``new Object[][] { … }`` that a suite's ``cases()`` returns."""
    start = text.index("new Object[][]")
    parser = Parser(text[start:])
    return parser.primary()


def unchain(value) -> tuple[dict, list]:
    """``ARXConfiguration.create(…)`` and the calls chained on it, innermost first."""
    calls = []
    while "on" in value:
        calls.append({"call": value["call"], "args": value["args"]})
        value = value["on"]
    return value, calls[::-1]


def normalized(suite: str, index: int, case: dict) -> dict | None:
    """One case as the yardstick reads it, or None when it is not on Adult."""
    args = case["args"]
    created, chained = unchain(args[0])
    strings = [a for a in args[1:3] if isinstance(a, str)]
    if ADULT not in strings:
        return None
    out = {"suite": suite, "index": index}
    if len(args) == 4 and isinstance(args[3], int) and not isinstance(args[3], bool):
        # (config, dataset, sensitive, hashcode): a local recoding case checked by a hash of its output.
        out.update(sensitive=args[2] or None, expected={"output_hash": args[3]})
        rest = []
    elif isinstance(args[2], str) and args[2] == ADULT:
        out["sensitive"] = args[1] or None
        loss, transformation, practical, *rest = args[3:]
        out["expected"] = {"loss": str(loss) if not isinstance(loss, str) else loss,
                           "transformation": transformation}
        out["practical_monotonicity"] = practical
    else:
        out["sensitive"] = None
        loss, transformation, practical, *rest = args[2:]
        out["expected"] = {"loss": str(loss) if not isinstance(loss, str) else loss,
                           "transformation": transformation}
        out["practical_monotonicity"] = practical
    if rest and isinstance(rest[-1], float):
        out["expected"]["tolerance"] = rest[-1]
    if created.get("call") == "ARXConfiguration.create":
        suppression, metric = created["args"][:2] if len(created["args"]) >= 2 else (created["args"][0], None)
        out["suppression_limit"], out["metric"] = suppression, metric
    else:  # a helper of the suite that builds the configuration (differential privacy's)
        out["suppression_limit"], out["metric"] = None, None
        out["configuration_helper"] = created
    out["models"] = [c["args"][0] for c in chained if c["call"] == "addPrivacyModel"]
    if suite == "TestAnonymizationTCloseness" and not any("TCloseness" in m.get("new", "") for m in out["models"]):
        # The suite's test() adds hierarchical t-closeness (t = 0.2, the attribute's hierarchy) to every case that
        # has no t-closeness model before running it ("Ugly hack!" in ARX's TestAnonymizationTCloseness.test()).
        path = f"./data/adult_hierarchy_{out['sensitive']}.csv"
        out["models"].append({"new": "HierarchicalDistanceTCloseness", "args": [
            out["sensitive"], 0.2, {"call": "Hierarchy.create", "args": [path, {"const": "StandardCharsets.UTF_8"}, ";"]}],
            "added_by_suite": True})
    out["settings"] = [c for c in chained if c["call"] != "addPrivacyModel"]
    return out


def metric_cases(arx: Path) -> list[dict]:
    """``TestUtilityMetrics``' cases on Adult: (config, sensitive, dataset, then transformation/loss pairs)."""
    cases = []
    for index, row in enumerate(case_rows((arx / TESTS / "TestUtilityMetrics.java").read_text(encoding="utf-8"))):
        config, sensitive, dataset, *pairs = row[0]["args"]
        if dataset != ADULT:
            continue
        created, chained = unchain(config)
        cases.append({"index": index, "sensitive": sensitive or None, "suppression_limit": created["args"][0],
                      "metric": created["args"][1], "models": [c["args"][0] for c in chained],
                      "values": {json.dumps(json.loads(node)): loss for node, loss in zip(pairs[::2], pairs[1::2])}})
    return cases


def transcribe(arx: Path) -> list[dict]:
    suites = sorted(path.name for path in (arx / TESTS).iterdir() if SUITES.fullmatch(path.name))
    cases = []
    for name in suites:
        text = (arx / TESTS / name).read_text(encoding="utf-8")
        if "new Object[][]" not in text:
            continue
        suite = name.removesuffix(".java")
        for index, row in enumerate(case_rows(text)):
            case = normalized(suite, index, row[0])
            if case is not None:
                cases.append(case)
    return cases


def main() -> None:
    arx = Path(sys.argv[1])
    commit = subprocess.run(["git", "-C", str(arx), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    cases = transcribe(arx)
    document = {"source": "https://github.com/arx-deidentifier/arx", "commit": commit or None,
                "licence": "Apache-2.0 (LICENSE-ARX)", "data": ADULT, "cases": cases}
    (HERE / "adult_cases.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{len(cases)} Adult cases from {len({c['suite'] for c in cases})} suites")
    values = metric_cases(arx)
    document = {**document, "cases": values, "suite": "TestUtilityMetrics"}
    (HERE.parent.parent / "tests" / "data" / "arx_utility_metrics.json").write_text(
        json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{len(values)} utility-metric cases on Adult")
    # The research subset ARX's δ-presence, k-map and profitability cases name (DataSubset.create(adult, subset)).
    subset = (arx / SUBSET).read_bytes()
    with gzip.GzipFile(HERE / "adult_subset.csv.gz", "wb", compresslevel=9, mtime=0) as out:
        out.write(subset)
    print(f"{len(subset.splitlines()) - 1} research-subset records")


if __name__ == "__main__":
    main()
