"""What each subcommand does; each returns its exit code (see ``parser.EPILOG``)."""

from __future__ import annotations

import argparse
import json
import numbers
import os
from pathlib import Path

import duckdb
from sqlglot import exp

from .. import datasets
from ..cluster.mdav import MDAV
from ..cluster.personalized import Personalization, TopDownPartitioning
from ..cluster.semisupervised import SemiSupervisedClustering
from ..datasets import examples
from ..declare.budget import ledger_at
from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..encode.tables import Tables
from ..engine import DuckDBEngine
from ..errors import AnonymizationError, PolicyNotSatisfied
from ..hierarchy.hierarchy import Hierarchy
from ..perturb.perturbation import (
    AdditiveNoise,
    EmpiricalSynthesis,
    Pram,
    RandomizedResponse,
)
from ..privacy.checks import CheckReport
from ..privacy.differential import differentially_private
from ..release.files import (
    checked_table_name,
    read_release_info,
    release_format,
    write_atomically,
)
from ..release.signing import new_key_pair
from ..release.verify import verify as verify_release
from ..search.strategies import STRATEGIES
from ..session import Anonymizer, connect
from ..sqlgen import build as sb
from ..utility.metrics import ArxPublisherPayout
from . import policy_options
from .console import Console
from .parser import EXIT_NOT_MET as NOT_MET
from .parser import EXIT_OK as OK
from .sources import (
    Source,
    attach_database,
    database_table,
    existing_file,
    ledger_key,
    open_source,
    with_events,
)

# ------------------------------------------------------------------------------------------------ shared steps

def _open(args: argparse.Namespace, console: Console) -> tuple[Source, Anonymizer]:
    source = with_events(open_source(args.source, args.table), getattr(args, "events", []),
                         getattr(args, "person", None))
    if source.bundled and hasattr(args, "qi"):  # the commands that take a policy (perturb takes none)
        policy_options.bundled_defaults(args)
    return source, Anonymizer(source.engine, progress=console.progress)


def _output(args: argparse.Namespace) -> Path:
    """The release path (checked before any work, so a bad one fails at once)."""
    path = args.output or Path(f"release.{args.format or 'duckdb'}")
    release_format(path, args.format)
    return path


def _search_options(args: argparse.Namespace) -> Path | None:
    """Before any work: a heuristic strategy's limit (when the levels are not given), and the release path (None
    with --check-only)."""
    if not args.levels and args.strategy is not None:
        STRATEGIES[args.strategy].check_budget(args.time_limit, args.check_limit)
    return None if args.check_only else _output(args)


def _release_table(args: argparse.Namespace, source: Source) -> str:
    """--release-table, or the source's name (``release`` for tables, each of which becomes a view of its name)."""
    if args.release_table is not None:
        return checked_table_name(args.release_table)
    return checked_table_name("release" if isinstance(source.relation, Tables) else source.name)


def _generalize(args: argparse.Namespace, console: Console, anon: Anonymizer, source: Source, policy: Policy) -> int:
    """Search (or take --levels), report the check, and publish to ``args.output`` unless --check-only."""
    table = _release_table(args, source)  # a bad name fails before the search
    console.say(f"policy: {policy.describe()}")
    if differentially_private(policy.models):
        return _release_privately(args, console, anon, source, policy, table)
    if args.ledger is not None:
        raise AnonymizationError("--ledger keeps what a --differential-privacy release spends")
    args.strategy = args.strategy or "optimal"
    if args.local_recoding is not None and args.cell_suppression:
        raise AnonymizationError("--local-recoding and --cell-suppression each keep the suppressed records their "
                                 "own way: choose one")
    if args.local_recoding is not None:
        return _recode_locally(args, console, anon, source, policy, table)
    if args.cell_suppression:
        return _suppress_cells(args, console, anon, source, policy, table)
    if args.importance:
        raise AnonymizationError("--importance is for --cell-suppression")
    with anon.encode(source.relation, policy) as encoded:  # one reading of the source for every step
        if args.levels:
            levels = args.levels
        else:
            metric = args.metric if args.payout is None else ArxPublisherPayout(**args.payout[0],
                                                                               journalist=args.payout[1])
            result = anon.search(encoded, None, metric=metric, strategy=args.strategy, label=args.label,
                                 evaluator=args.evaluator, memory_budget=args.memory_budget,
                                 time_limit=args.time_limit, check_limit=args.check_limit)
            console.say(result.summary())
            if not result.found:
                return NOT_MET
            levels = result.levels
        console.say(f"levels: {', '.join(f'{c}={v}' for c, v in levels.items())}")
        if args.check_only:
            report = anon.check(encoded, None, levels)
            _say_check(console, report)
            return OK if report.within_limit else NOT_MET
        try:  # the check is the publish's own: the records are checked once
            release = anon.publish(encoded, None, levels, args.output, table=table, format=args.format,
                                   sign_with=args.sign_with)
        except PolicyNotSatisfied as unmet:
            if unmet.report is not None:
                _say_check(console, unmet.report)
            raise
    _say_check(console, release.check)
    console.say(release.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def _say_check(console: Console, report: CheckReport) -> None:
    console.say(report.summary())
    console.say(report.model_rows.text())


def _release_privately(args: argparse.Namespace, console: Console, anon: Anonymizer, source: Source, policy: Policy,
                       table: str) -> int:
    """--differential-privacy: sample, walk by the exponential mechanism and publish in one call (SafePub)."""
    given = [option for option, value in (("--levels", args.levels), ("--check-only", args.check_only),
                                          ("--payout", args.payout), ("--local-recoding", args.local_recoding),
                                          ("--cell-suppression", args.cell_suppression)) if value]
    if given:
        raise AnonymizationError(f"--differential-privacy samples, chooses its transformation by the exponential "
                                 f"mechanism and writes the release in one step: it takes no {given[0]}")
    result, release = anon.anonymize(
        source.relation, policy, args.output, metric=args.metric, strategy=args.strategy, label=args.label,
        table=table, format=args.format, evaluator=args.evaluator, memory_budget=args.memory_budget,
        time_limit=args.time_limit, check_limit=args.check_limit, sign_with=args.sign_with, ledger=args.ledger,
        source_name=ledger_key(args.source, args.table))
    console.say(f"SafePub: levels {', '.join(f'{c}={v}' for c, v in result.levels.items())} "
                f"({result.checks} of {result.lattice_size} transformations scored)")
    console.say(release.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def _recode_locally(args: argparse.Namespace, console: Console, anon: Anonymizer, source: Source, policy: Policy,
                    table: str) -> int:
    """--local-recoding: search, recode the suppressed records locally, publish (a release is its purpose)."""
    if args.levels or args.check_only or args.payout is not None:
        given = "--levels" if args.levels else "--check-only" if args.check_only else "--payout"
        raise AnonymizationError(f"--local-recoding searches each step and writes a release: it takes no {given}")
    recoding, release = anon.anonymize_locally(
        source.relation, policy, args.output, metric=args.metric, strategy=args.strategy, label=args.label,
        table=table, format=args.format, evaluator=args.evaluator, memory_budget=args.memory_budget,
        iterations=args.local_recoding, time_limit=args.time_limit, check_limit=args.check_limit,
        sign_with=args.sign_with)
    console.say(recoding.summary())
    console.say(release.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def _suppress_cells(args: argparse.Namespace, console: Console, anon: Anonymizer, source: Source, policy: Policy,
                    table: str) -> int:
    """--cell-suppression: search (or take --levels), suppress single values, publish (a release is its purpose)."""
    if args.check_only or args.payout is not None:
        given = "--check-only" if args.check_only else "--payout"
        raise AnonymizationError(f"--cell-suppression suppresses values and writes a release: it takes no {given}")
    cells, release = anon.suppress_cells(
        source.relation, policy, args.output, importance=args.importance,
        levels=args.levels or None, metric=args.metric, strategy=args.strategy, label=args.label, table=table,
        format=args.format, evaluator=args.evaluator, memory_budget=args.memory_budget, time_limit=args.time_limit,
        check_limit=args.check_limit, sign_with=args.sign_with)
    console.say(cells.summary())
    console.say(release.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


# ---------------------------------------------------------------------------------------------------- commands

def search(args: argparse.Namespace, console: Console) -> int:
    args.output = _search_options(args)
    source, anon = _open(args, console)
    return _generalize(args, console, anon, source, policy_options.policy(anon, args))


def check(args: argparse.Namespace, console: Console) -> int:
    args.check_only, args.output, args.format, args.release_table = True, None, None, None
    return search(args, console)


def run_stored(args: argparse.Namespace, console: Console) -> int:
    args.output = _search_options(args)
    path = existing_file(args.source)
    engine = attach_database(path)
    anon = Anonymizer(engine, progress=console.progress)
    policy = anon.policy(args.policy)
    source = Source(engine, database_table(engine, path, args.table), args.table, path)
    return _generalize(args, console, anon, source, policy)


def mondrian(args: argparse.Namespace, console: Console) -> int:
    output = None if args.check_only else _output(args)
    source, anon = _open(args, console)
    policy = policy_options.policy(anon, args, hierarchies_required=False)
    console.say(f"policy: {policy.describe()}")
    styles = {column: style for given in args.style for column, style in given.items()}
    result = anon.mondrian(source.relation, policy, output,
                           relaxed=args.relaxed, orders=dict(args.order) or None, categorical=args.categorical,
                           styles=styles or None, numeric_style=args.numeric_style,
                           table=_release_table(args, source), format=args.format, sign_with=args.sign_with)
    console.say(result.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def _clustering_method(args: argparse.Namespace):
    if args.block_size is not None and args.method not in ("mdav", "semi-supervised"):
        raise AnonymizationError("--block-size is for --method mdav and --method semi-supervised")
    blocked = {} if args.block_size is None else {"block_size": args.block_size or None}
    if args.method == "semi-supervised":
        return SemiSupervisedClustering(**blocked)
    if args.method == "mdav":
        return MDAV(**blocked)
    personalization = None
    if args.personalization is not None:
        column, tree = args.personalization
        if tree is None:
            raise AnonymizationError("--personalization needs COLUMN=TREE.csv: the sensitive attribute's tree")
        personalization = Personalization(column, Hierarchy.from_arx_csv(existing_file(str(tree))))
    return TopDownPartitioning(seed=args.seed, personalization=personalization)


def cluster(args: argparse.Namespace, console: Console) -> int:
    output = None if args.check_only else _output(args)
    source, anon = _open(args, console)
    policy = policy_options.policy(anon, args, hierarchies_required=False)
    console.say(f"policy: {policy.describe()}")
    clusters = anon.cluster(source.relation, policy, _clustering_method(args), numeric=args.numeric)
    console.say(clusters.summary())
    report = clusters.check()
    console.say(report.summary())
    if args.check_only:
        return OK if report.satisfied else NOT_MET
    release = clusters.publish(output, table=_release_table(args, source), format=args.format,
                               sign_with=args.sign_with)
    console.say(release.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def perturb(args: argparse.Namespace, console: Console) -> int:
    if not (args.numeric or args.categorical):
        raise AnonymizationError("name the columns to perturb with --numeric and --categorical")
    output = _output(args)
    source, anon = _open(args, console)
    method = (EmpiricalSynthesis(args.bins) if args.method == "empirical-synthesis"
              else AdditiveNoise(args.noise, args.snr))
    categorical_method = args.categorical_method or (
        "empirical-synthesis" if args.method == "empirical-synthesis" else "randomized-response")
    released = anon.perturb(
        source.relation, output, method=method, numeric=args.numeric, categorical=args.categorical,
        categorical_method=_categorical_method(args, categorical_method),
        identifiers=args.identifier, insensitive=args.insensitive, others=args.others, seed=args.seed, table=_release_table(args, source), format=args.format,
        sign_with=args.sign_with)
    console.say(released.summary())
    console.say(f"time: {console.seconds():.2f} s")
    return OK


def _categorical_method(args: argparse.Namespace, name: str):
    if (args.transition_matrix is not None or args.invariant) and name != "pram":
        raise AnonymizationError("--transition-matrix and --invariant are for --categorical-method pram")
    if name == "empirical-synthesis":
        return EmpiricalSynthesis(args.bins)
    if name == "randomized-response":
        return RandomizedResponse(args.keep_probability)
    if args.transition_matrix is None:
        return Pram(keep=args.keep_probability, alpha=args.pram_alpha)
    matrix = pd.read_csv(existing_file(args.transition_matrix), index_col=0, dtype={0: str})
    matrix.index, matrix.columns = matrix.index.astype(str), matrix.columns.astype(str)
    return Pram(matrix=matrix, invariant=args.invariant)


def hierarchy(args: argparse.Namespace, console: Console) -> int:
    """Build a hierarchy over a column's distinct values; write it as ARX CSV, or store it in a database."""
    source = open_source(args.source, args.table)
    name = args.name or args.column
    if args.output is not None and source.path is not None and _same_file(args.output, source.path):
        raise AnonymizationError(f"-o {str(args.output)!r} is the source file: it would be overwritten")
    built = _build_hierarchy(args, name, _distinct_values(source, args.column))
    source.engine.close()
    if args.output is not None:
        write_atomically(args.output, built.to_arx_csv)
        console.say(f"wrote hierarchy {name!r} ({len(built.rows)} values, {built.levels} levels) to {args.output}")
        return OK
    target = connect(args.into)
    try:
        target.add_hierarchy(name, built)
    finally:
        target.con.close()
    console.say(f"stored hierarchy {name!r} ({len(built.rows)} values, {built.levels} levels) as table "
                f"anon.hierarchy_{name} in {args.into}")
    return OK


def _distinct_values(source: Source, column: str) -> list:
    relation = source.expression()
    columns = source.engine.columns(relation)
    if column not in columns:
        raise AnonymizationError(f"--column {column!r}: the source has no such column (it has {columns})")
    return [row[0] for row in source.engine.rows(exp.select(sb.col(column)).distinct().from_(relation))]


def _build_hierarchy(args: argparse.Namespace, name: str, values: list) -> Hierarchy:
    try:
        return _built(args, name, values)
    except ValueError as error:  # Hierarchy.dates lets pandas' ValueError through, which names no column
        raise AnonymizationError(f"--column {args.column!r}: {error}") from error


def _built(args: argparse.Namespace, name: str, values: list) -> Hierarchy:
    if args.builder in ("intervals", "top-bottom"):
        wrong = [v for v in values if v is not None and not isinstance(v, numbers.Number)]
        if wrong:
            raise AnonymizationError(f"--column {args.column!r} is not numeric (it holds {wrong[0]!r}): "
                                     f"{args.builder} needs numbers")
        if args.builder == "top-bottom":
            return Hierarchy.top_bottom(values, bottom=args.bottom, top=args.top, widths=args.widths,
                                        origin=args.origin, name=name)
        return Hierarchy.intervals(values, widths=args.widths, cuts=args.cuts, origin=args.origin, name=name)
    if args.builder == "redaction":
        return Hierarchy.redaction(values, mask=args.mask, name=name)
    return Hierarchy.dates(values, name=name)


def _same_file(a: Path, b: Path) -> bool:
    return a.exists() and os.path.samefile(a, b)


def report(args: argparse.Namespace, console: Console) -> int:
    """Write the HTML report on a release: with --source (or --adult) the source's side, accuracy and frontier."""
    release = existing_file(args.release)
    info = read_release_info(release)  # not a release: an error before any other work
    output = args.output or release.with_suffix(".html")
    if args.adult:
        source = open_source(None, None)
        args.hierarchies = args.hierarchies or datasets.adult_hierarchy_dir()
    elif args.source is not None:
        source = open_source(args.source, args.table)
    else:
        source = Source(DuckDBEngine(duckdb.connect()), None, None, None)
    anon = Anonymizer(source.engine, progress=console.progress)
    policy = None
    if args.frontier is not None and source.relation is None:
        raise AnonymizationError("--frontier needs the release's source: give --source (or --adult)")
    if args.frontier is not None or (args.population is not None and info.get("policy")):
        # The frontier searches with the release's policy; a population table is recoded by its hierarchies.
        policy = _release_policy(anon, info, args.hierarchies)
    population = existing_file(args.population) if args.population is not None else None
    frontier = [int(v) if float(v).is_integer() else v for v in args.frontier] if args.frontier else None
    written = anon.report(release, output, source=source.relation, policy=policy, label=args.label,
                          sampling_fraction=args.sampling_fraction, population=population, frontier=frontier,
                          parameter=args.frontier_parameter, metric=args.metric, threshold=args.threshold,
                          tables=args.tables, custodian_view=args.custodian_view, public_key=args.public_key,
                          noise_epsilon=args.noise_epsilon, ledger=args.ledger,
                          source_name=ledger_key(args.source, args.table) if args.noise_epsilon is not None else None)
    console.say(f"wrote the report on {release} to {written} ({console.seconds():.2f} s)")
    return OK


def verify(args: argparse.Namespace, console: Console) -> int:
    """Verify a release from its rows (and its signature with --public-key); a failure is raised as its error."""
    verification = verify_release(args.release, public_key=args.public_key, format=args.format)
    shown = verification.frame().assign(holds=lambda f: f["holds"].map({True: "holds", False: "FAILS"}).fillna(
        "not checked"))
    console.say(shown.to_string(index=False))
    verification.raise_for_failure()
    console.say(verification.summary())
    return OK


def exposure(args: argparse.Namespace, console: Console) -> int:
    """How exposed people are in a table, file or release whose records carry a person column."""
    source, anon = _open(args, console)
    measured = anon.person_exposure(source.relation, args.qi, args.person, args.k)
    console.say(measured.summary())
    return OK


def risk(args: argparse.Namespace, console: Console) -> int:
    """SUDA2 and the individual risk of a table, file or release, over its key variables."""
    source, anon = _open(args, console)
    suda = anon.suda2(source.relation, args.key, strata=args.strata, max_size=args.max_size,
                      dis_fraction=args.dis_fraction)
    scored = suda.combinations[suda.combinations["score"] > 0]
    console.say(f"SUDA2 over {', '.join(args.key)} (sets of at most {suda.max_size}): {len(scored):,} records have "
                f"minimal sample uniques; highest score {suda.combinations['score'].max():g}, highest DIS-SUDA "
                f"{suda.combinations['dis_score'].max():.4f}")
    for reason in suda.why(args.top):
        console.say(f"  {reason}")
    console.say(suda.attribute_contributions.to_string(index=False))
    individual = anon.individual_risk(source.relation, args.key, weight=args.weight, strata=args.strata,
                                      method=args.method)
    console.say(individual.summary())
    if individual.by_stratum is not None:
        console.say(individual.by_stratum.to_string(index=False))
    return OK


def aggregate(args: argparse.Namespace, console: Console) -> int:
    """A differentially private aggregate of the source, spent from its privacy budget."""
    source = open_source(args.source, args.table)
    anon = Anonymizer(source.engine, progress=console.progress)
    result = anon.dp_aggregate(source.relation, args.statistic, epsilon=args.epsilon, delta=args.delta,
                               column=args.column, bounds=args.bounds, categories=args.categories,
                               mechanism=args.mechanism, ledger=args.ledger,
                               source_name=ledger_key(args.source, args.table))
    console.say(result.to_string(index=False))
    return OK


def budget(args: argparse.Namespace, console: Console) -> int:
    """Declare a source's privacy budget in a ledger (--epsilon), and show what its releases spent."""
    key = ledger_key(args.source, args.table)
    with ledger_at(None, args.ledger) as book:
        state = book.declare(key, args.epsilon, args.delta) if args.epsilon is not None else book.state(key)
        spent = book.spent(key)
    console.say(state.summary())
    if len(spent):
        console.say(spent.drop(columns="source").to_string(index=False))
    return OK


def keygen(args: argparse.Namespace, console: Console) -> int:
    """Write a new Ed25519 key pair for signing releases."""
    private, public = new_key_pair(args.key)
    console.say(f"wrote the private key to {private} (keep it: it signs releases; never share it) and the public key "
                f"to {public} (give it to recipients: duckanon verify RELEASE --public-key {public.name})")
    return OK


def _release_policy(anon: Anonymizer, info: dict, folder: Path | None) -> Policy:
    """The policy a release recorded, its hierarchies read from ``folder`` (``<column>.csv``) or the database."""
    described = info.get("policy")
    if not described:
        raise AnonymizationError(f"--frontier: the release records no policy (it is a {info['kind']})")
    hierarchies = {}
    for column in described["columns"]:
        if column["role"] == "quasi-identifier":
            hierarchies[column["column"]] = policy_options.hierarchy(anon, column["column"], None, folder, True)
            if isinstance(hierarchies[column["column"]], str):
                hierarchies[column["column"]] = anon.hierarchy(column["column"])
    columns = [(c["column"], c["role"], c.get("hierarchy")) for c in described["columns"]]
    models = [(i, m["model"], m["sensitive"], json.dumps(m["params"])) for i, m in enumerate(described["models"])]
    methods = [(c["column"], json.dumps(c["method"])) for c in described["columns"] if "method" in c]
    return Policy.from_rows(columns, models, described, hierarchies, methods)


def example_data(args: argparse.Namespace, console: Console) -> int:
    """Write the README's example files into a folder."""
    written = examples.write_examples(args.folder)
    console.say(f"wrote {', '.join(p.name for p in written)} to {args.folder}")
    return OK


COMMANDS = {"search": search, "check": check, "mondrian": mondrian, "cluster": cluster, "perturb": perturb,
            "run": run_stored, "hierarchy": hierarchy, "report": report, "verify": verify, "exposure": exposure,
            "risk": risk, "aggregate": aggregate, "budget": budget, "keygen": keygen, "example-data": example_data}
