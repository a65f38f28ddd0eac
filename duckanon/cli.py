"""``duckanon``: anonymize a DuckDB table or a CSV/Parquet file into a release database file.

Without --levels it searches the generalization lattice for the transformation that satisfies the policy and
minimizes --metric. With no input it runs on the bundled Adult census data (eight quasi-identifiers with ARX's
hierarchies, salary-class sensitive, k = 5, up to 5% suppression).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
from sqlglot import exp

from . import datasets
from . import sqlbuild as sb
from .anonymizer import Anonymizer
from .metrics import metric_names
from .search import STRATEGIES
from .errors import AnonymizationError
from .hierarchy import Hierarchy
from .models import (AlphaKAnonymity, DistinctLDiversity, EntropyLDiversity, KAnonymity, PrivacyModel,
                     PSensitiveKAnonymity, RecursiveCLDiversity, TCloseness)
from .policy import Policy

def _pair(text: str, option: str) -> tuple[str, str]:
    name, sep, value = text.rpartition(":") if option != "levels" else text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--{option} expects COLUMN:VALUE, got {text!r}")
    return name, value


def _number(text: str, option: str, kind=float):
    try:
        return kind(text)
    except ValueError:
        raise AnonymizationError(f"--{option}: {text!r} is not a {'whole ' if kind is int else ''}number") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duckanon", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="?", help="a DuckDB database file (with --table), or a CSV or Parquet file; "
                                                  "omitted: the bundled Adult data")
    parser.add_argument("--table", help="the table to anonymize inside a DuckDB database file")
    parser.add_argument("-o", "--output", default="release.duckdb", help="release file to write (default %(default)s)")
    parser.add_argument("--release-table", help="name of the released table (default: the source table's name)")
    roles = parser.add_argument_group("roles")
    roles.add_argument("--qi", action="append", default=[], metavar="COLUMN[=HIERARCHY.csv]",
                       help="a quasi-identifier and its ARX-format hierarchy (or one found in --hierarchies, or a "
                            "hierarchy stored in the database's anon schema)")
    roles.add_argument("--hierarchies", type=Path, help="folder of ARX hierarchies named <column>.csv")
    roles.add_argument("--identifier", action="append", default=[], help="a column to drop")
    roles.add_argument("--sensitive", action="append", default=[], help="a sensitive column, released as it is")
    roles.add_argument("--insensitive", action="append", default=[], help="a column released as it is")
    roles.add_argument("--others", choices=("error", "drop", "insensitive"), default="error",
                       help="what to do with columns given no role (default: %(default)s)")
    models = parser.add_argument_group("privacy models")
    models.add_argument("-k", "--k", type=int, help="k-anonymity")
    models.add_argument("--l-diversity", action="append", default=[], metavar="COLUMN:L", help="distinct l-diversity")
    models.add_argument("--entropy-l", action="append", default=[], metavar="COLUMN:L", help="entropy l-diversity")
    models.add_argument("--recursive-l", action="append", default=[], metavar="COLUMN:C:L",
                        help="recursive (c,l)-diversity")
    models.add_argument("--alpha-k", action="append", default=[], metavar="COLUMN:ALPHA",
                        help="(alpha,k)-anonymity with -k (alpha bounds every value)")
    models.add_argument("--p-sensitive", action="append", default=[], metavar="COLUMN:P",
                        help="p-sensitive k-anonymity with -k")
    models.add_argument("--t-closeness", action="append", default=[], metavar="COLUMN:T[:ordered]",
                        help="t-closeness, equal distance unless ':ordered' follows")
    transform = parser.add_argument_group("transformation")
    transform.add_argument("--levels", metavar="COLUMN=LEVEL,…",
                           help="the generalization level of every quasi-identifier, e.g. age=2,sex=0; "
                                "omitted: search for the best")
    transform.add_argument("--metric", default="loss", choices=metric_names(),
                           help="what the search minimizes (default %(default)s)")
    transform.add_argument("--strategy", default="optimal", choices=list(STRATEGIES),
                           help="search strategy (default %(default)s)")
    transform.add_argument("--label", help="class column that mi-loss weighs quasi-identifiers by")
    transform.add_argument("--max-suppressed", type=int, help="largest number of records that may be suppressed")
    transform.add_argument("--suppression", choices=("replace", "drop"), default="replace",
                           help="replace a violating record's quasi-identifiers by '*', or drop it (default %(default)s)")
    transform.add_argument("--suppression-limit", type=float,
                           help="largest share of records that may be suppressed (default 0; 0.05 on the bundled data)")
    parser.add_argument("--check-only", action="store_true", help="report, write no release")
    return parser


def _models(args: argparse.Namespace) -> list[PrivacyModel]:
    models: list[PrivacyModel] = [KAnonymity(args.k)] if args.k is not None else []
    needs_k = args.alpha_k or args.p_sensitive
    if needs_k and args.k is None:
        raise AnonymizationError("--alpha-k and --p-sensitive need -k")
    for text in args.l_diversity:
        column, value = _pair(text, "l-diversity")
        models.append(DistinctLDiversity(column, _number(value, "l-diversity", int)))
    for text in args.entropy_l:
        column, value = _pair(text, "entropy-l")
        models.append(EntropyLDiversity(column, _number(value, "entropy-l")))
    for text in args.recursive_l:
        column, c, l = (text.rsplit(":", 2) + ["", ""])[:3]
        models.append(RecursiveCLDiversity(column, _number(c, "recursive-l"), _number(l, "recursive-l", int)))
    for text in args.alpha_k:
        column, value = _pair(text, "alpha-k")
        models.append(AlphaKAnonymity(column, _number(value, "alpha-k"), args.k))
    for text in args.p_sensitive:
        column, value = _pair(text, "p-sensitive")
        models.append(PSensitiveKAnonymity(column, _number(value, "p-sensitive", int), args.k))
    for text in args.t_closeness:
        distance = "equal"
        if text.endswith(":ordered"):
            text, distance = text[: -len(":ordered")], "ordered"
        column, value = _pair(text, "t-closeness")
        models.append(TCloseness(column, _number(value, "t-closeness"), distance))
    if not models:
        raise AnonymizationError("give at least one privacy model, e.g. -k 5")
    return models


def _hierarchy(anon: Anonymizer, column: str, file: str | None, folder: Path | None) -> Hierarchy | str:
    if file:
        return Hierarchy.from_arx_csv(file, name=column)
    if folder is not None and (folder / f"{column}.csv").is_file():
        return Hierarchy.from_arx_csv(folder / f"{column}.csv", name=column)
    if anon.has_hierarchy(column):
        return column
    raise AnonymizationError(f"no hierarchy for quasi-identifier {column!r}: give --qi {column}=FILE.csv, "
                             f"--hierarchies DIR holding {column}.csv, or store one in the database")


def _levels(text: str) -> dict[str, int]:
    levels = {}
    for item in text.split(","):
        column, value = _pair(item, "levels")
        levels[column] = _number(value, "levels", int)
    return levels


def _open_source(args: argparse.Namespace) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A connection and the source (table name or file path); the bundled Adult data when no source is given."""
    if args.source is None:
        con = duckdb.connect()
        datasets.load_adult(con, "adult")
        return con, "adult"
    path = Path(args.source)
    if not path.is_file():
        raise AnonymizationError(f"no such file: {args.source!r}")
    if path.suffix.lower() in (".csv", ".tsv", ".gz", ".parquet", ".json"):
        return duckdb.connect(), str(path)
    if not args.table:
        raise AnonymizationError(f"{args.source!r} is a database file: name the table with --table")
    # The source database is opened read-only: anonymizing never changes it; our scratch state lives in memory.
    con = duckdb.connect()
    sb.run(con, exp.Attach(this=exp.alias_(sb.lit(str(path)), "source", quoted=True),
                           expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))]))
    return con, sb.table(args.table, "main", "source")


def _adult_defaults(args: argparse.Namespace) -> None:
    folder = datasets.adult_hierarchy_dir()
    if not args.qi:
        args.qi = [q for q in datasets.ADULT_QUASI_IDENTIFIERS if q != "salary-class"]
        args.hierarchies = args.hierarchies or folder
        args.sensitive = args.sensitive or ["salary-class"]
        args.others = "drop"
    if args.k is None and not (args.l_diversity or args.entropy_l or args.recursive_l or args.t_closeness):
        args.k = 5
    if args.label is None and args.metric == "mi-loss":
        args.label = "salary-class"
    if args.suppression_limit is None:
        args.suppression_limit = 0.05


def run(argv: Sequence[str] | None = None, out=sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    if args.source is None:
        _adult_defaults(args)
    con, source = _open_source(args)
    anon = Anonymizer(con, progress=lambda message: print(
        f"[{time.perf_counter() - started:7.2f} s] {message}", file=sys.stderr, flush=True))
    quasi = {}
    for item in args.qi:
        column, _, file = item.partition("=")
        quasi[column] = _hierarchy(anon, column, file or None, args.hierarchies)
    policy = Policy(quasi_identifiers=quasi, models=_models(args), identifiers=args.identifier,
                    sensitive=args.sensitive, insensitive=args.insensitive, others=args.others,
                    suppression=args.suppression, suppression_limit=args.suppression_limit,
                    max_suppressed=args.max_suppressed)
    print(f"policy: {policy.describe()}", file=out)
    if args.levels:
        levels = _levels(args.levels)
    else:
        result = anon.search(source, policy, metric=args.metric, strategy=args.strategy, label=args.label)
        print(result.summary(), file=out)
        if not result.found:
            return 1
        levels = result.levels
    print(f"levels: {', '.join(f'{c}={v}' for c, v in levels.items())}", file=out)
    report = anon.check(source, policy, levels)
    print(report.summary(), file=out)
    print(report.per_model.to_string(index=False), file=out)
    if args.check_only:
        return 0 if report.within_limit else 1
    table = args.release_table or args.table or ("adult" if args.source is None else Path(source).stem.split(".")[0])
    release = anon.publish(source, policy, levels, args.output, table=table)
    print(release.summary(), file=out)
    print(f"time: {time.perf_counter() - started:.2f} s", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except (AnonymizationError, duckdb.Error, OSError) as error:
        print(f"duckanon: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
