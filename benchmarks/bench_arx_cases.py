"""ARX's own anonymization test cases on Adult as a yardstick: issue 26's table.

    python benchmarks/bench_arx_cases.py                    # every case (a few minutes)
    python benchmarks/bench_arx_cases.py --suites KAnonymity LDiversity --json out.json

``arx_cases/adult_cases.json`` holds the 208 cases of ARX's test suites that run on ``data/adult.csv`` (transcribed
from ARX's sources by ``arx_cases/transcribe.py``; Apache-2.0): each a suppression limit, a quality metric, privacy
models, the sensitive attribute, and the optimum ARX's test expects with its information loss.  duckanon's bundled
Adult (the 30,162 complete records) is that file, record for record, and its hierarchies are ARX's.

For each case whose models and metric duckanon has, this runs duckanon's optimal search on the same quasi-identifiers
(ARX's nine, less the case's sensitive attribute) with ARX's suppression semantics (``replace-unchecked``:
suppressed records are starred and left out of every check, t-closeness compares with all records), and compares,
by ARX's own metric definition:

- ``same``: the transformation ARX expects;
- ``both none``: neither finds a transformation that satisfies the policy;
- ``better``: a transformation of lower information loss than ARX's (ARX's answer is heuristic, or its search assumed
  monotonicity) -- ARX's node satisfies duckanon's check too, and scores higher;
- ``equal value``: another transformation of the same information loss;
- ``differs``: anything else (ARX's node fails duckanon's check, duckanon's answer is worse, or the two score ARX's
  node differently, which says the definitions differ there): each is explained in the note beside it.

Each case also says whether duckanon's value of ARX's node equals the loss ARX's test expects (the metric
definition), and the search's time.  A case duckanon cannot run is listed with what it needs.  The table goes to
``results/arx_cases.md``; ``--json`` keeps every row.
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import duckdb  # noqa: E402
from common import USA_POPULATION, markdown_table  # noqa: E402
from sqlglot import exp  # noqa: E402

import duckanon  # noqa: E402
from duckanon import (  # noqa: E402
    AverageReidentificationRisk,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DeltaPresence,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    JournalistNoAttackProfitability,
    JournalistProfitability,
    KMap,
    Policy,
    PopulationUniqueness,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
    RecursiveCLDiversity,
    SampleUniqueness,
    TCloseness,
)
from duckanon.datasets import ADULT_QUASI_IDENTIFIERS, adult_hierarchy_dir, load_adult  # noqa: E402
from duckanon.encode.binding import bind  # noqa: E402
from duckanon.privacy.models import DataFacts  # noqa: E402
from duckanon.search import run as search_run  # noqa: E402
from duckanon.sqlgen import build as sb  # noqa: E402
from duckanon.utility.metrics import (  # noqa: E402
    ArxEntropyBasedInformationLoss,
    ArxLoss,
    ArxNonMonotoneEntropy,
    ArxNonUniformEntropy,
    ArxPublisherPayout,
    AverageClassSize,
    Discernibility,
    DiscernibilityStar,
    Metric,
    RankedLoss,
)

CASES = HERE / "arx_cases" / "adult_cases.json"
RESULTS = HERE / "results" / "arx_cases.md"
# Relative tolerance between two information losses (ARX floors Loss per attribute to 10 decimals).
CLOSE = 1e-9
HEURISTIC_SUITES = {"TestAnonymizationGenetic": "its genetic algorithm",
                    "TestAnonymizationHeuristic": "its best-effort bottom-up search",
                    "TestAnonymizationHeuristicTopDown": "its best-effort top-down search"}
ISSUE_ELSEWHERE = {"TestAnonymizationDifferentialPrivacy": "differential privacy (issue 29)",
                   "TestAnonymizationLocalRecoding": "local recoding (issue 28)"}
AGGREGATION = {"AggregateFunction.GEOMETRIC_MEAN": "geometric-mean", "AggregateFunction.ARITHMETIC_MEAN":
               "arithmetic-mean", "AggregateFunction.SUM": "sum", "AggregateFunction.MAXIMUM": "maximum",
               "AggregateFunction.RANK": "rank"}


ESTIMATORS = {"CellSizeEstimator.ZERO_TRUNCATED_POISSON": "zero-truncated-poisson",
              "CellSizeEstimator.POISSON": "poisson"}


class Unsupported(Exception):
    """What duckanon lacks to run a case."""


@dataclass
class Translation:
    models: list
    metric: Metric
    note: str = ""
    # The rows (0-based, of adult.csv) anonymized and measured, the others left out, when the case names a subset
    # (ARX's Inclusion, or the research subset of δ-presence and k-map, whose population is then all of Adult).
    rows: Callable[[object], list[int]] | None = None
    subset: str = ""


SUBSET = HERE / "arx_cases" / "adult_subset.csv.gz"
RESEARCH_SUBSET = {"call": "DataSubset.create", "args": [
    {"call": "Data.create", "args": ["./data/adult.csv", {"const": "StandardCharsets.UTF_8"}, ";"]},
    {"call": "Data.create", "args": ["./data/adult_subset.csv", {"const": "StandardCharsets.UTF_8"}, ";"]}]}


def arx_subset_rows(anon) -> list[int]:
    """The rows of Adult that ARX's ``DataSubset.create(adult, adult_subset)`` marks: each subset record takes the
    first not yet taken Adult row of equal values (all columns, as text), as ARX matches them."""
    with gzip.open(SUBSET, "rt", encoding="utf-8", newline="") as file:
        reader = csv.reader(file, delimiter=";")
        header = next(reader)
        subset = [tuple(row) for row in reader]
    frame = anon.workspace.engine.frame(exp.select(*[sb.as_text(sb.col(c)).as_(c, quoted=True) for c in header])
                                        .from_(sb.table("adult")))
    free: dict[tuple, list[int]] = collections.defaultdict(list)
    for position, row in enumerate(frame.itertuples(index=False, name=None)):
        free[row].append(position)
    for waiting in free.values():
        waiting.reverse()  # pop() then takes the first
    return sorted(free[row].pop() for row in subset)


def java_random_subset(size: int) -> list[int]:
    """The rows ARX's ``TestAnonymizationSubset.getSubset(size)`` includes: ``size`` draws of
    ``java.util.Random(0xDEADBEEF).nextInt(size)``, as a set (java.util.Random's generator, written out: a 48-bit
    linear congruence, ``nextInt`` rejecting the draws that would bias it)."""
    multiplier, mask = 0x5DEECE66D, (1 << 48) - 1
    state = (-559038737 ^ multiplier) & mask  # 0xDEADBEEF is a negative Java int, widened to long

    def next31() -> int:
        nonlocal state
        state = (state * multiplier + 0xB) & mask
        return state >> 17

    def next_int(bound: int) -> int:
        if bound & -bound == bound:
            return (bound * next31()) >> 31
        while True:
            bits = next31()
            value = bits % bound
            if bits - value + (bound - 1) < 2**31:  # Java's int overflow test
                return value

    return sorted({next_int(size) for _ in range(size)})


@dataclass
class Row:
    case: str
    models: str
    metric: str
    limit: float | None
    needs: str = ""
    verdict: str = ""
    arx_node: list | None = None
    node: list | None = None
    arx_loss: str = ""
    value_of_arx_node: float | RankedLoss | None = None
    value: float | RankedLoss | None = None
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)


# TestAnonymizationProfitability's cost-benefit configurations (getConfig1 … getConfig4)
COST_BENEFIT = {
    "getConfig1": {"adversary_cost": 2.0, "adversary_gain": 1200.0, "publisher_loss": 300.0, "publisher_benefit": 1200.0},
    "getConfig2": {"adversary_cost": 20.0, "adversary_gain": 120.0, "publisher_loss": 3000.0,
                   "publisher_benefit": 1200.0},
    "getConfig3": {"adversary_cost": 20.0, "adversary_gain": 120.0, "publisher_loss": 3000.0,
                   "publisher_benefit": 120.0},
    "getConfig4": {"adversary_cost": 20.0, "adversary_gain": 1000.0, "publisher_loss": 3000.0,
                   "publisher_benefit": 120.0},
}


def cost_benefit(case: dict) -> dict | None:
    """The case's cost-benefit configuration (ARX's default, all 0 but... none, when it sets none)."""
    for setting in case["settings"]:
        if setting["call"] == "setCostBenefitConfiguration":
            return COST_BENEFIT[setting["args"][0]["call"]]
    return None


def _model(spec: dict, hierarchies_dir: Path, costs: dict | None = None):
    name, args = spec.get("new") or spec.get("call"), spec["args"]
    if name == "KAnonymity":
        return KAnonymity(args[0])
    if name == "DistinctLDiversity":
        return DistinctLDiversity(args[0], args[1])
    if name == "RecursiveCLDiversity":
        return RecursiveCLDiversity(args[0], args[1], args[2])
    if name == "EntropyLDiversity":
        grassberger = len(args) > 2 and args[2] == {"const": "EntropyEstimator.GRASSBERGER"}
        return EntropyLDiversity(args[0], args[1], "grassberger" if grassberger else "shannon")
    if name == "HierarchicalDistanceTCloseness":
        attribute = args[0]
        return TCloseness(attribute, args[1], distance="hierarchical",
                          hierarchy=Hierarchy.from_arx_csv(hierarchies_dir / f"{attribute}.csv"))
    if name == "EqualDistanceTCloseness":
        return TCloseness(args[0], args[1], distance="equal")
    if name == "OrderedDistanceTCloseness":
        return TCloseness(args[0], args[1], distance="ordered")
    if name == "BasicBLikeness":
        return BasicBetaLikeness(args[0], args[1])
    if name == "EnhancedBLikeness":
        return EnhancedBetaLikeness(args[0], args[1])
    if name == "DDisclosurePrivacy":
        return DeltaDisclosurePrivacy(args[0], args[1])
    if name == "DPresence" and args[2] == RESEARCH_SUBSET:
        return DeltaPresence(args[0], args[1], "adult", arx_size_first=True)  # ARX's order of checks
    if name == "KMap" and len(args) == 2 and args[1] == RESEARCH_SUBSET:
        return KMap(args[0], population="adult")
    if name == "KMap" and len(args) in (3, 4) and args[2] == {"call": "ARXPopulationModel.create",
                                                             "args": [{"const": "Region.USA"}]}:
        estimator = ESTIMATORS[args[3]["const"]] if len(args) == 4 else "poisson"
        return KMap(args[0], USA_POPULATION, args[1], estimator)
    if name in ("ProfitabilityProsecutorNoAttack", "ProfitabilityJournalistNoAttack"):
        if costs is None:
            raise Unsupported("ARX's default cost-benefit configuration")
        gain, cost = costs["adversary_gain"], costs["adversary_cost"]
        if name == "ProfitabilityProsecutorNoAttack":
            return ProsecutorNoAttackProfitability(gain, cost)
        if args[0] == RESEARCH_SUBSET:
            return JournalistNoAttackProfitability(gain, cost, population="adult")
    if name in ("ProfitabilityProsecutor", "ProfitabilityJournalist"):
        if costs is None:
            raise Unsupported("ARX's default cost-benefit configuration")
        if name == "ProfitabilityProsecutor":
            return ProsecutorProfitability(**costs)
        if args[0] == RESEARCH_SUBSET:
            return JournalistProfitability(**costs, population="adult")
    if name == "AverageReidentificationRisk":
        return AverageReidentificationRisk(*args)
    if name == "SampleUniqueness":
        return SampleUniqueness(args[0])
    if name == "getPopulationUniqueness":  # its test's helper: the USA's population, 15 solver steps per start
        return PopulationUniqueness(args[0], USA_POPULATION, args[1]["const"].split(".")[-1].lower(), solver_steps=15)
    needs = {"DPresence": "δ-presence", "KMap": "k-map",
             "AverageReidentificationRisk": "average re-identification risk as a model",
             "SampleUniqueness": "sample uniqueness as a model",
             "getPopulationUniqueness": "population uniqueness as a model",
             "EDDifferentialPrivacy": "differential privacy (issue 29)"}
    raise Unsupported(needs.get(name, f"the model {name}"))


def _metric(spec: dict, costs: dict | None = None) -> tuple[Metric, str]:
    call, args = spec["call"].removeprefix("Metric."), spec["args"]
    if call == "createPublisherPayoutMetric" and costs is not None:
        return ArxPublisherPayout(**costs, journalist=args == [True]), ""
    if call == "createEntropyBasedInformationLossMetric":
        return ArxEntropyBasedInformationLoss(*args), ""
    if call in ("createLossMetric", "createPrecomputedLossMetric"):
        if call == "createPrecomputedLossMetric":
            args = args[1:]  # the precomputation threshold: how ARX computes, not what
        gs = next((a for a in args if isinstance(a, float)), 0.5)
        aggregation = next((a["const"] for a in args if isinstance(a, dict)), "AggregateFunction.GEOMETRIC_MEAN")
        return ArxLoss(gs, AGGREGATION[aggregation]), ""
    if call == "createDiscernabilityMetric":
        return (DiscernibilityStar(), "") if args == [True] else (Discernibility(), "")
    if call == "createAECSMetric" and not args:
        return AverageClassSize(), ""
    if call in ("createPrecomputedEntropyMetric", "createEntropyMetric"):
        monotone = next((a for a in args if isinstance(a, bool)), False)
        return (ArxNonUniformEntropy() if monotone else ArxNonMonotoneEntropy()), ""
    names = {"createPublisherPayoutMetric": "ARX's default cost-benefit configuration",
             "createClassificationMetric": "the classification metric", "createPrecisionMetric": "precision",
             "createHeightMetric": "height"}
    raise Unsupported(names.get(call, call))


def translate(case: dict, hierarchies_dir: Path) -> Translation:
    if case["suite"] in ISSUE_ELSEWHERE:
        raise Unsupported(ISSUE_ELSEWHERE[case["suite"]])
    costs = cost_benefit(case)
    missing, models, rows, subset = [], [], None, ""
    for spec in case["models"]:
        if spec.get("new") == "Inclusion" and spec["args"][0].get("call") == "getSubset":
            size = spec["args"][0]["args"][0]
            rows, subset = (lambda _anon, size=size: java_random_subset(size)), "ARX's Inclusion (its test's subset)"
            continue
        if RESEARCH_SUBSET in spec["args"]:
            rows, subset = arx_subset_rows, "ARX's research subset (data/adult_subset.csv), all of Adult its population"
        try:
            models.append(_model(spec, hierarchies_dir, costs))
        except Unsupported as lack:
            missing.append(str(lack))
    try:
        metric, note = _metric(case["metric"], costs)
    except Unsupported as lack:
        missing.append(str(lack))
    if missing:
        raise Unsupported("; ".join(dict.fromkeys(missing)))
    return Translation(models, metric, note, rows, subset)


def describe_models(case: dict) -> str:
    parts = []
    for spec in case["models"]:
        shown = [a["const"].split(".")[-1] if isinstance(a, dict) and "const" in a else a for a in spec["args"]
                 if not isinstance(a, list) and not (isinstance(a, dict) and "const" not in a)]
        parts.append(f"{spec.get('new') or spec.get('call')}({', '.join(map(str, shown))})")
    return " + ".join(parts)


def describe_metric(case: dict) -> str:
    spec = case["metric"]
    if spec is None:
        return "(configured by the suite)"
    args = [a["const"].split(".")[-1] if isinstance(a, dict) else a for a in spec["args"]]
    return f"{spec['call'].removeprefix('Metric.create').removesuffix('Metric')}({', '.join(map(str, args))})"


def evaluate_nodes(anon, source: str, policy: Policy, metric: Metric, nodes: list) -> list:
    """duckanon's results (verdict, value) of ``nodes`` of ``source`` under ``policy`` and ``metric``."""
    workspace = anon.workspace
    with bind(workspace, source, policy) as bound, \
            search_run.evaluator(workspace, bound, [metric], None) as evaluator:
        indices = [evaluator.lattice.index(tuple(node)) for node in nodes]
        evaluator.evaluate_many(indices)
        return [(evaluator.satisfies(i), evaluator.results[i].values[metric.name]) for i in indices]


def run_case(anon, case: dict, translation: Translation, row: Row) -> None:
    qis = [q for q in ADULT_QUASI_IDENTIFIERS if q != case["sensitive"]]
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in qis}
    policy = Policy(quasi_identifiers=hierarchies, models=translation.models, suppression="replace-unchecked",
                    suppression_limit=case["suppression_limit"], others="insensitive")
    expected = case["expected"]["transformation"]
    row.arx_node, row.arx_loss = expected, case["expected"]["loss"]
    if translation.note:
        row.notes.append(translation.note)
    source = "adult"
    if translation.rows is not None:
        rows = translation.rows(anon)
        source = subset_table(anon, rows)
        row.notes.append(f"{translation.subset}: its {len(rows):,} rows anonymized (ARX measures, checks and "
                         f"suppresses only them)")
    started = time.perf_counter()
    try:
        result = anon.search(source, policy, metric=translation.metric)
    except duckanon.PolicyError as refused:  # parameters no release of this data can satisfy, refused up front
        row.seconds = time.perf_counter() - started
        row.verdict = "both none" if expected is None else "differs"
        row.notes.append(f"duckanon refuses the policy up front: {refused}")
        return
    row.seconds = time.perf_counter() - started
    if result.best is not None:
        row.node = [int(result.levels[q]) for q in qis]
        row.value = result.best.values[translation.metric.name]
        sizes_only = [m for m in translation.models
                      if isinstance(m, KAnonymity) or (isinstance(m, KMap) and m.population is None)]
        if len(sizes_only) == len(translation.models):
            frame = anon.workspace.engine.frame(exp.select(*[sb.col(q) for q in qis]).from_(sb.table(source)))
            k = max(m.for_data(DataFacts(records=len(frame))).minimum_size for m in sizes_only)
            violating = pandas_violating(frame, hierarchies, row.node, k)
            row.notes.append(f"pandas: {violating} records in classes below k = {k} at duckanon's node "
                             f"(at most {int(case['suppression_limit'] * len(frame))} allowed)")
    if expected is None:
        row.verdict = "both none" if row.node is None else "differs"
        if row.node is not None:
            row.notes.append("ARX's test expects no solution; duckanon found one")
        return
    [(arx_node_satisfies, row.value_of_arx_node)] = evaluate_nodes(anon, source, policy, translation.metric,
                                                                    [expected])
    defined_alike = _close(row.value_of_arx_node, _arx_loss(row.arx_loss))
    if not defined_alike:
        row.notes.append("duckanon's value of ARX's node is not the loss ARX expects")
        if any(a == {"const": "EntropyEstimator.GRASSBERGER"} for m in case["models"] for a in m["args"]):
            row.notes.append("ARX's Grassberger check stops at the first partial sum over its bound, which can fall "
                             "again (G(1) < 0): it suppresses other records than the estimate does")
    if row.node is None:
        row.verdict = "differs"
        row.notes.append("duckanon finds no solution" + ("" if arx_node_satisfies else
                                                          "; ARX's node fails duckanon's check"))
    elif row.node == expected:
        row.verdict = "same"
    elif _close(row.value, _arx_loss(row.arx_loss)):
        # ARX's test asserts the loss only; a transformation other than the one it lists is printed as a note
        row.verdict = "equal value"
        row.notes.append("duckanon's optimum has the very loss ARX's test asserts (it asserts no transformation)"
                         + ("" if arx_node_satisfies else "; the transformation it lists fails duckanon's check"))
    elif not defined_alike:
        row.verdict = "differs"
    elif not arx_node_satisfies:
        row.verdict = "differs"
        row.notes.append("ARX's node fails duckanon's check")
    elif _close(row.value, row.value_of_arx_node):
        row.verdict = "equal value"
    elif row.value < row.value_of_arx_node:
        row.verdict = "better"
        row.notes.append(_why_arx_missed(case))
    else:
        row.verdict = "differs"
        row.notes.append("duckanon's optimum scores worse than ARX's node")


def subset_table(anon, rows: list[int]) -> str:
    """A table of the Adult rows at these 0-based positions (ARX's row numbers: the bundled table keeps its order)."""
    name = f"adult_subset_{len(rows)}"
    engine = anon.workspace.engine
    positions = exp.select(exp.Star()).from_(exp.Unnest(expressions=[exp.Array(expressions=[sb.lit(r) for r in rows])])
                                                 .as_("included", table=["position"]))
    numbered = exp.select(exp.Star(), exp.column("rowid").as_("__position", quoted=True)).from_(sb.table("adult"))
    chosen = (exp.select(exp.Star(except_=[sb.col("__position")]))
              .from_(numbered.subquery("numbered"))
              .where(sb.col("__position").isin(query=positions)))
    engine.run(exp.Create(this=sb.table(name), kind="TABLE", replace=True, expression=chosen))
    return name


def _why_arx_missed(case: dict) -> str:
    if case["suite"] in HEURISTIC_SUITES:
        return f"ARX's answer is heuristic ({HEURISTIC_SUITES[case['suite']]})"
    if case.get("practical_monotonicity"):
        return "ARX's search assumed the policy monotone (practical monotonicity)"
    return "ARX's search missed it"


def pandas_violating(frame, hierarchies: dict[str, Hierarchy], levels: list[int], k: int) -> int:
    """Records in classes smaller than k at ``levels``, by a pandas group-by (a check independent of duckanon)."""
    generalized = frame[list(hierarchies)].astype(str).copy()
    for (attribute, hierarchy), level in zip(hierarchies.items(), levels):
        path = {row[0]: row[level] for row in hierarchy.rows}
        generalized[attribute] = generalized[attribute].map(path)
    sizes = generalized.groupby(list(hierarchies), dropna=False).size()
    return int(sizes[sizes < k].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", nargs="*", help="suite names (without TestAnonymization), default all")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    options = parser.parse_args()
    document = json.loads(CASES.read_text(encoding="utf-8"))
    cases = [c for c in document["cases"] if not options.suites
             or c["suite"].removeprefix("TestAnonymization").removeprefix("Test") in options.suites]
    con = duckdb.connect()
    load_adult(con, "adult")
    anon = duckanon.connect(con)
    rows = []
    for number, case in enumerate(cases, start=1):
        name = f"{case['suite'].removeprefix('TestAnonymization').removeprefix('Test')}#{case['index']}"
        row = Row(name, describe_models(case), describe_metric(case), case["suppression_limit"])
        try:
            translation = translate(case, adult_hierarchy_dir())
        except Unsupported as lack:
            row.needs = str(lack)
        else:
            run_case(anon, case, translation, row)
        rows.append(row)
        print(f"[{number}/{len(cases)}] {name}: {row.verdict or 'needs ' + row.needs}"
              + (f" ({row.seconds:.2f} s)" if row.seconds is not None else ""), file=sys.stderr, flush=True)
    report = render(rows, document)
    print(report)
    if not options.no_write:
        RESULTS.write_text(report, encoding="utf-8")
    if options.json:
        options.json.write_text(json.dumps([vars(r) for r in rows], indent=1, default=_value), encoding="utf-8")


def render(rows: list[Row], document: dict) -> str:
    ran = [r for r in rows if not r.needs]
    verdicts = collections.Counter(r.verdict for r in ran)
    needs = collections.Counter(need for r in rows if r.needs for need in r.needs.split("; "))
    definition = sum(1 for r in ran if r.value_of_arx_node is not None
                     and "not the loss ARX expects" not in " ".join(r.notes))
    lines = ["# ARX's test cases on Adult, run by duckanon's optimal search",
             "",
             f"{len(rows)} cases from ARX's test suites (commit {str(document['commit'])[:10]}), "
             f"{len(ran)} run, {len(rows) - len(ran)} need what duckanon lacks.",
             "",
             markdown_table(["verdict", "cases"], [[v, n] for v, n in sorted(verdicts.items())]),
             "",
             f"duckanon's value of ARX's node equals the loss ARX's test expects in {definition} of the "
             f"{sum(1 for r in ran if r.value_of_arx_node is not None)} run cases where ARX expects a node.",
             "",
             "## What the other cases need (a case may need several)",
             "",
             markdown_table(["capability", "cases"], needs.most_common()),
             "",
             "## Every case run",
             "",
             markdown_table(
                 ["case", "models", "metric", "limit", "verdict", "ARX's node", "duckanon's node", "ARX's loss",
                  "duckanon: ARX's node", "duckanon: its optimum", "search s", "notes"],
                 [[r.case, r.models, r.metric, r.limit, r.verdict, _node(r.arx_node), _node(r.node), r.arx_loss,
                   _value(r.value_of_arx_node), _value(r.value), f"{r.seconds:.2f}", "; ".join(r.notes)]
                  for r in ran]),
             ""]
    return "\n".join(lines)


def _node(node: list | None) -> str:
    return "none" if node is None else "".join(map(str, node))


def _value(value: float | RankedLoss | None) -> str:
    if isinstance(value, RankedLoss):
        return "[" + ", ".join(f"{r:.10g}" for r in value.ranks) + "]"
    return "" if value is None else f"{value:.10g}"


def _arx_loss(text: str) -> float | list[float]:
    """The loss ARX's test expects: a number, or a rank-aggregated loss's list of the attributes' losses."""
    return json.loads(text) if text.startswith("[") else float(text)


def _close(value: float | RankedLoss, other: float | RankedLoss | list[float]) -> bool:
    """Whether two losses are equal up to :data:`CLOSE` (a rank-aggregated loss rank by rank)."""
    if isinstance(value, RankedLoss) or isinstance(other, (RankedLoss, list)):
        ours = value.ranks if isinstance(value, RankedLoss) else [value]
        theirs = other.ranks if isinstance(other, RankedLoss) else other if isinstance(other, list) else [other]
        return len(ours) == len(theirs) and all(_close(a, b) for a, b in zip(ours, theirs))
    return abs(value - other) <= CLOSE * max(1.0, abs(other))


if __name__ == "__main__":
    main()
