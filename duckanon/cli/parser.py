"""The argument parser: one subcommand per algorithm, sharing option groups (argparse parents)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._version import __version__
from ..cluster.mdav import BLOCK_SIZE as MDAV_BLOCK_SIZE
from ..cluster.semisupervised import BLOCK_SIZE as SEMI_BLOCK_SIZE
from ..declare.policy import SUPPRESSION_MODES
from ..release.files import FORMATS
from ..search.memory_evaluator import DEFAULT_MEMORY_BUDGET
from ..search.run import EVALUATORS
from ..search.strategies import STRATEGIES
from ..utility.metrics import metric_names
from . import values

CLUSTER_METHODS = ("semi-supervised", "top-down", "mdav")
NUMERIC_PERTURBATIONS = ("empirical-synthesis", "additive-noise")
CATEGORICAL_PERTURBATIONS = ("empirical-synthesis", "randomized-response", "pram")
DEFAULT_COMMAND = "search"

DESCRIPTION = """Anonymize a DuckDB table or a CSV/Parquet file into a release file.

Without a subcommand, `duckanon [options]` is `duckanon search [options]`; with no source it runs on the bundled
Adult census data (eight quasi-identifiers with ARX's hierarchies, salary-class sensitive, k = 5, at most 5 %
suppressed). A source database file is only read (attached read-only); hierarchies and policies stored in its `anon`
schema are found. `duckanon COMMAND --help` lists a command's options."""

# The exit codes, as EPILOG documents them.
EXIT_OK, EXIT_NOT_MET, EXIT_INPUT, EXIT_UNVERIFIED, EXIT_IO, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 70, 130
EXIT_GUARANTEE, EXIT_DIGEST, EXIT_SIGNATURE, EXIT_WRONG_KEY, EXIT_NOT_A_RELEASE = 5, 6, 7, 8, 9
EPILOG = """exit codes:
  0    done (check: the policy holds)
  1    the policy cannot be met: no transformation satisfies it within the suppression limit, or the given one does not
  2    usage or input error: a bad option or value; a missing file, table, column, hierarchy or policy; bad data for
       the method; an output path that cannot be a release; an optional extra that is not installed (it is named)
  3    the written release failed its verification; nothing was published
  4    a file or database could not be read or written (operating system or DuckDB error)
  5    verify: a guarantee recomputed from the release's rows fails or differs from its release_info (the first
       failing model and class are named)
  6    the release's rows (or a CSV's bytes) are not those its release_info records: changed after publishing
  7    verify --public-key: the signature does not match the release's info and digest: altered after signing
  8    verify --public-key: the key given did not sign the release, or the release is not signed
  9    the file is not a release duckanon wrote, or its release_info is missing or unreadable
  70   internal error (a bug: please report it; DUCKANON_TRACEBACK=1 shows the traceback, DUCKANON_DEBUG=1 logs the
       SQL statement DuckDB rejected)
  130  interrupted
Every failure is one line `duckanon: error: …` on stderr."""


class UsageError(Exception):
    """A command line that does not parse."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        # argparse would print the whole usage and exit; we report one line and let main choose the exit code.
        raise UsageError(f"{message} (see {self.prog} --help)")


def _formatted(**kwargs) -> dict:
    return dict(formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG, **kwargs)


def _parent() -> Parser:
    return Parser(add_help=False)


def _common() -> Parser:
    parser = _parent()
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return parser


def _source(*, bundled: bool) -> Parser:
    parser = _parent()
    if bundled:
        parser.add_argument("source", nargs="?", help="a DuckDB database file (with --table), or a CSV, Parquet or "
                                                      "JSON file; omitted: the bundled Adult data")
    else:
        parser.add_argument("source", help="a DuckDB database file (with --table), or a CSV, Parquet or JSON file")
    parser.add_argument("--table", help="the table to read inside a DuckDB database file")
    return parser


def _events() -> Parser:
    parser = _parent()
    parser.add_argument("--events", action="append", default=[], metavar="TABLE",
                        help="an event table joined to the source (the person table, one row per person) by --person: "
                             "a table of the source's database file, or a CSV, Parquet or JSON file (named by its "
                             "stem); a DuckDB release holds one view per table")
    return parser


def _other_roles(group) -> None:
    """The roles of the columns an algorithm does not transform."""
    group.add_argument("--identifier", action="append", default=[], metavar="COLUMN", help="a column to drop")
    group.add_argument("--insensitive", action="append", default=[], metavar="COLUMN",
                       help="a column released as it is")
    group.add_argument("--others", choices=("error", "drop", "insensitive"), default="error",
                       help="what to do with columns given no role (default: %(default)s; drop on the bundled data)")


def _policy() -> Parser:
    parser = _parent()
    roles = parser.add_argument_group("roles")
    roles.add_argument("--qi", action="append", default=[], type=values.column_file, metavar="COLUMN[=HIERARCHY.csv]",
                       help="a quasi-identifier and its ARX-format hierarchy (or <COLUMN>.csv in --hierarchies, or a "
                            "hierarchy stored in the source database's anon schema)")
    roles.add_argument("--hierarchies", type=Path, metavar="DIR", help="folder of ARX hierarchies named <column>.csv")
    roles.add_argument("--sensitive", action="append", default=[], metavar="COLUMN",
                       help="a sensitive column, released as it is")
    _other_roles(roles)
    methods = parser.add_argument_group("columns released transformed")
    methods.add_argument("--pseudonymize", action="append", default=[], metavar="COLUMN",
                         help="a column whose values become keyed HMAC-SHA-256 pseudonyms (key: --pseudonym-key)")
    methods.add_argument("--mask", action="append", default=[], type=values.mask, metavar="COLUMN=PATTERN",
                         help="a column masked by PATTERN: email-domain, keep-last:N, keep-first:N, or "
                              "regex:REGEX:GROUPS (the groups shown, comma-separated; the rest masked)")
    methods.add_argument("--date-shift", action="append", default=[], type=values.date_shift,
                         metavar="COLUMN=DAYS[:BY]", help="a date column, each person's (column BY, by default "
                                                          "--person) dates moved by one offset within ±DAYS days")
    methods.add_argument("--stratum", action="append", default=[], metavar="COLUMN",
                         help="a column released as it is, within each of whose values (a region, a survey wave) "
                              "every model holds on its own (sdcMicro's strataVars); repeatable")
    methods.add_argument("--person", metavar="COLUMN",
                         help="the column naming each record's person: k counts people and their signatures (the "
                              "classes of all their records), suppression and its limit count people; the column "
                              "must be released (--pseudonymize or --insensitive)")
    methods.add_argument("--pseudonym-key", type=values.key_source, metavar="env:NAME|file:PATH",
                         help="where the secret key (>= 32 bytes) of --pseudonymize and --date-shift is; without it, "
                              "a random key per release")
    models = parser.add_argument_group("privacy models")
    models.add_argument("-k", "--k", type=values.whole,
                        help="k-anonymity (on the bundled data 5 unless given, also beside other models)")
    models.add_argument("--l-diversity", action="append", default=[], metavar="COLUMN:L",
                        type=values.column_values("COLUMN:L", values.whole), help="distinct l-diversity")
    models.add_argument("--entropy-l", action="append", default=[], metavar="COLUMN:L[:grassberger]",
                        type=values.entropy_l,
                        help="entropy l-diversity; with ':grassberger', Grassberger's estimate of the entropy (as ARX)")
    models.add_argument("--recursive-l", action="append", default=[], metavar="COLUMN:C:L",
                        type=values.column_values("COLUMN:C:L", values.number, values.whole),
                        help="recursive (c,l)-diversity")
    models.add_argument("--alpha-k", action="append", default=[], metavar="COLUMN:ALPHA",
                        type=values.column_values("COLUMN:ALPHA", values.number),
                        help="(alpha,k)-anonymity with -k: alpha bounds every value's share of a class")
    models.add_argument("--alpha-k-values", action="append", default=[], metavar="COLUMN:ALPHA:VALUE,…",
                        type=values.column_values("COLUMN:ALPHA:VALUE,…", values.number, str),
                        help="(alpha,k)-anonymity with -k for the listed highly sensitive values only")
    models.add_argument("--p-sensitive", action="append", default=[], metavar="COLUMN:P",
                        type=values.column_values("COLUMN:P", values.whole), help="p-sensitive k-anonymity with -k")
    models.add_argument("--alpha-l-k", action="append", default=[], metavar="COLUMN:ALPHA:L",
                        type=values.column_values("COLUMN:ALPHA:L", values.number, values.whole),
                        help="(alpha,l)-diversity k-anonymity with -k and --sensitivity-levels (personalized "
                             "sensitivity levels)")
    models.add_argument("--sensitivity-levels", type=values.assignments("VALUE=LEVEL,…", values.whole),
                        metavar="VALUE=LEVEL,…", help="every sensitive value's sensitivity level, for --alpha-l-k")
    models.add_argument("--t-closeness", action="append", default=[], metavar="COLUMN:T[:ordered]",
                        type=values.t_closeness, help="t-closeness, equal distance unless ':ordered' follows")
    models.add_argument("--beta-likeness", action="append", default=[], metavar="COLUMN:BETA[:enhanced]",
                        type=values.beta_likeness, help="basic β-likeness, or enhanced with ':enhanced' (as ARX)")
    models.add_argument("--delta-disclosure", action="append", default=[], metavar="COLUMN:DELTA",
                        type=values.column_values("COLUMN:DELTA", values.number),
                        help="δ-disclosure privacy: |log2(class share / table share)| < DELTA for every value")
    models.add_argument("--k-map", action="append", default=[], metavar="K[:POPULATION[:SIGNIFICANCE[:ESTIMATOR]]]",
                        type=values.k_map,
                        help="k-map: K alone, at least K records of --population per class; with POPULATION (its "
                             "size), estimated as ARX does: k-anonymity with the k' at which a population class below "
                             "K is improbable (significance 0.01 and the zero-truncated-poisson estimator unless "
                             "given; or poisson)")
    models.add_argument("--delta-presence", action="append", default=[], metavar="MIN:MAX[:arx]",
                        type=values.delta_presence,
                        help="δ-presence: every class's share of its --population records lies in [MIN, MAX]; "
                             ":arx checks it in ARX's order, after the policy's class-size bound (k, l), so that a "
                             "population class without a record of the source is suppressed instead of failing")
    models.add_argument("--average-risk", action="append", default=[], metavar="SHARE[:HIGHEST:RECORDS]",
                        type=values.average_risk,
                        help="average re-identification risk (1 / average class size) at most SHARE; with HIGHEST "
                             "and RECORDS, also at most that share of records in classes riskier than HIGHEST (as "
                             "ARX); the smallest classes are suppressed until it holds")
    models.add_argument("--sample-uniqueness", action="append", default=[], metavar="SHARE", type=values.share,
                        help="at most SHARE of the records unique on the quasi-identifiers (as ARX)")
    models.add_argument("--population-uniqueness", action="append", default=[],
                        metavar="SHARE:POPULATION[:ESTIMATOR]", type=values.population_uniqueness,
                        help="at most SHARE of a population of POPULATION people estimated unique, by Dankar's "
                             "rule unless pitman, zayatz or snb is given (as ARX)")
    models.add_argument("--no-attack", action="append", default=[], metavar="GAIN:COST[:journalist]",
                        type=values.no_attack,
                        help="no attack pays an adversary who gains GAIN per success at COST per attempt: classes of "
                             "more than GAIN/COST records (prosecutor), or of --population records with :journalist "
                             "(as ARX's no-attack profitability)")
    models.add_argument("--profitability", action="append", default=[], metavar="COST:GAIN:LOSS:BENEFIT[:journalist]",
                        type=values.cost_benefit,
                        help="keep a class only where releasing it pays the publisher, as ARX's profitability with "
                             "an attack: BENEFIT per record times one minus the class's entropy-based information "
                             "loss, less LOSS per re-identification when an attack at COST for GAIN pays (success 1 / "
                             "the class's records, or its --population records with :journalist); full-domain "
                             "generalization only")
    models.add_argument("--differential-privacy", action="append", default=[],
                        metavar="EPSILON:DELTA[:STEPS[:SEARCH_EPSILON]]", type=values.differential_privacy,
                        help="(ε,δ)-differential privacy by SafePub, as ARX: a random sample generalized by a "
                             "transformation the exponential mechanism picks in STEPS steps (default 100) with "
                             "SEARCH_EPSILON of the budget (default ε/10), classes below the derived k dropped; "
                             "alone, over quasi-identifiers only")
    models.add_argument("--population", metavar="TABLE|FILE",
                        help="the population the source is a sample of, for --delta-presence and --k-map K: a table "
                             "of the source's database, or a CSV, Parquet or JSON file")
    suppression = parser.add_argument_group("suppression")
    suppression.add_argument("--suppression", choices=SUPPRESSION_MODES,
                             help="replace a violating record's quasi-identifiers by '*' (its records then one class "
                                  "the policy checks too), drop it, or replace it unchecked as ARX does "
                                  "(default replace; drop under --differential-privacy)")
    suppression.add_argument("--suppression-limit", type=values.share, metavar="SHARE",
                             help="largest share of records that may be suppressed (default 0; 0.05 on the bundled "
                                  "data)")
    suppression.add_argument("--max-suppressed", type=values.count, metavar="RECORDS",
                             help="largest number of records that may be suppressed")
    return parser


def _search() -> Parser:
    parser = _parent()
    search = parser.add_argument_group("transformation")
    search.add_argument("--levels", type=values.levels, metavar="COLUMN=LEVEL,…",
                        help="the generalization level of every quasi-identifier, e.g. age=2,sex=0; omitted: search "
                             "for the best")
    search.add_argument("--metric", default="loss", choices=metric_names(),
                        help="what the search minimizes (default %(default)s)")
    search.add_argument("--payout", type=values.cost_benefit, metavar="COST:GAIN:LOSS:BENEFIT[:journalist]",
                        help="minimize ARX's publisher payout loss instead of --metric: an adversary's COST per "
                             "attack and GAIN per success, the publisher's LOSS per re-identified record and BENEFIT "
                             "per record released; with :journalist the adversary succeeds with 1 / a class's records "
                             "in the policy's --population")
    search.add_argument("--strategy", choices=list(STRATEGIES),
                        help="search strategy (default optimal): optimal, samarati and exhaustive list the "
                             "lattice; lightning, top-down and genetic (ARX's heuristics, for lattices too wide to "
                             "list) need --time-limit or --check-limit; --differential-privacy walks by SafePub")
    search.add_argument("--ledger", type=Path, metavar="DATABASE",
                        help="with --differential-privacy: a DuckDB file keeping each source's privacy budget and "
                             "what every release spent (created if missing; see duckanon budget); a release that "
                             "would exceed the budget is refused")
    search.add_argument("--label", metavar="COLUMN",
                        help="class column that mi-loss weighs quasi-identifiers by (salary-class on the bundled data)")
    search.add_argument("--evaluator", default="auto", choices=EVALUATORS,
                        help="where nodes are checked: memory (in process), sql (in DuckDB), or auto: in process when "
                             "it fits --memory-budget (default %(default)s)")
    search.add_argument("--memory-budget", type=values.byte_size, metavar="BYTES",
                        help="with --evaluator auto, the memory that checking nodes in process may take: 2GB, 500MB, "
                             f"or a number of bytes (default {DEFAULT_MEMORY_BUDGET / 1e9:.1f}GB here)")
    search.add_argument("--time-limit", type=values.positive, metavar="SECONDS",
                        help="stop the search after this long and take the best transformation found (not proven "
                             "optimal)")
    search.add_argument("--check-limit", type=values.positive_whole, metavar="NODES",
                        help="stop the search after checking this many transformations and take the best found")
    search.add_argument("--local-recoding", type=values.positive_whole, nargs="?", const=100, metavar="STEPS",
                        help="after the search, anonymize the records it suppresses again among themselves on "
                             "levels of their own, as ARX's local recoding, in at most STEPS steps (default 100)")
    cells = parser.add_argument_group("cell suppression (sdcMicro's localSuppression)")
    cells.add_argument("--cell-suppression", action="store_true",
                       help="keep the records the generalization (the search's, or --levels) would suppress: replace "
                            "single values with a missing value until every record has k compatible records, a "
                            "missing value matching any (k-anonymity is the only model it reaches)")
    cells.add_argument("--importance", action="append", default=[], metavar="COLUMN",
                       help="with --cell-suppression: a quasi-identifier whose values are suppressed last; repeat, "
                            "most important first (the others by default: more categories, suppressed sooner)")
    return parser


def _output(*, check_only: bool = True) -> Parser:
    parser = _parent()
    output = parser.add_argument_group("release")
    output.add_argument("-o", "--output", type=Path, metavar="PATH",
                        help="release file to write; its extension (.duckdb/.db, .parquet, .csv) chooses the format "
                             "unless --format does (default release.duckdb, or release.<format>)")
    output.add_argument("--format", choices=FORMATS, help="release format (default: by the extension of -o)")
    output.add_argument("--release-table", metavar="NAME",
                        help="name of the released table (default: the source table's or file's name)")
    output.add_argument("--sign-with", type=Path, metavar="KEYFILE",
                        help="sign the release with this Ed25519 private key (PEM or OpenSSH; `duckanon keygen` makes "
                             "one): recipients check it with `duckanon verify --public-key` (the sign extra)")
    if check_only:
        output.add_argument("--check-only", action="store_true", help="report, write no release")
    return parser


def _mondrian_options(parser: Parser) -> None:
    group = parser.add_argument_group("Mondrian")
    group.add_argument("--relaxed", action="store_true",
                       help="relaxed Mondrian: records equal to the median may go to either side (default: strict)")
    group.add_argument("--numeric-style", choices=("range", "mean"), default="range",
                       help="how numbers are released (default %(default)s)")
    group.add_argument("--style", action="append", default=[], metavar="COLUMN=STYLE",
                       type=values.assignments("COLUMN=STYLE"),
                       help="a column's output style: range or mean for numbers, lca or set for categories")
    group.add_argument("--categorical", action="append", default=[], metavar="COLUMN",
                       help="a numeric quasi-identifier to cut along its hierarchy or --order instead of its value")
    group.add_argument("--order", action="append", default=[], metavar="COLUMN=V1,V2,…",
                       type=values.named_list("COLUMN=V1,V2,…"), help="the order to cut a category along")


def _cluster_options(parser: Parser) -> None:
    group = parser.add_argument_group("clustering")
    group.add_argument("--method", choices=CLUSTER_METHODS, required=True,
                       help="semi-supervised: (alpha,k) clustering guided by the sensitive values; top-down: "
                            "top-down partitioning with personalized protection; mdav: MDAV microaggregation (numbers "
                            "replaced by their group's mean)")
    group.add_argument("--numeric", action="append", metavar="COLUMN",
                       help="a quasi-identifier treated as a number (default: those of a numeric type)")
    group.add_argument("--seed", type=values.whole, default=0,
                       help="top-down: seed of the random first records (default %(default)s)")
    group.add_argument("--block-size", type=values.whole, default=None, metavar="RECORDS",
                       help=f"mdav, semi-supervised: cluster exactly within blocks of at most RECORDS records, cut "
                            f"at medians (default {MDAV_BLOCK_SIZE:,} for mdav, {SEMI_BLOCK_SIZE:,} for "
                            f"semi-supervised); 0: exactly at any size")
    group.add_argument("--personalization", type=values.column_file, metavar="COLUMN=TREE.csv",
                       help="top-down: each record's protection level column and the sensitive attribute's ARX-format "
                            "tree (personalized anonymity)")


def _perturb_options(parser: Parser) -> None:
    group = parser.add_argument_group("perturbation")
    group.add_argument("--numeric", action="append", default=[], metavar="COLUMN", help="a numeric column to perturb")
    group.add_argument("--categorical", action="append", default=[], metavar="COLUMN",
                       help="a categorical column to perturb")
    _other_roles(group)
    group.add_argument("--method", choices=NUMERIC_PERTURBATIONS, default="empirical-synthesis",
                       help="for numeric columns: empirical synthesis (values drawn from the column's own "
                            "histogram), or additive noise (default %(default)s)")
    group.add_argument("--bins", type=values.whole, default=20,
                       help="empirical synthesis: division points (default %(default)s)")
    group.add_argument("--noise", choices=("gaussian", "uniform"), default="gaussian",
                       help="additive noise: its distribution (default %(default)s)")
    group.add_argument("--snr", type=values.number, default=5.0,
                       help="additive noise: signal-to-noise ratio Var(X)/Var(noise) (default %(default)s)")
    group.add_argument("--categorical-method", choices=CATEGORICAL_PERTURBATIONS,
                       help="for categorical columns (default: empirical synthesis with --method empirical-synthesis, "
                            "else randomized response)")
    group.add_argument("--keep-probability", type=values.number, default=0.8,
                       help="randomized response: the probability a category is kept; pram: the least probability "
                            "(default %(default)s)")
    group.add_argument("--pram-alpha", type=values.number, default=0.5,
                       help="pram: the weight of the invariant matrix against keeping every category (default "
                            "%(default)s)")
    group.add_argument("--transition-matrix", type=Path, metavar="CSV",
                       help="pram: the transition matrix instead, a CSV file whose first column names each "
                            "category and whose header names the categories released in its place")
    group.add_argument("--invariant", action="store_true",
                       help="pram with --transition-matrix: refuse a matrix that does not keep the data's shares")
    group.add_argument("--seed", type=values.whole,
                       help="makes the release reproducible; never written to it, keep it secret (default: random)")


def _report_options(parser: Parser) -> None:
    parser.add_argument("release", metavar="RELEASE", help="a release file written by duckanon (.duckdb, .parquet, "
                                                           ".csv)")
    parser.add_argument("-o", "--output", type=Path, help="the report's HTML file (default: RELEASE with .html)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--source", help="the release's source: a DuckDB database file (with --table), or a CSV, "
                                         "Parquet or JSON file; adds the source's side, accuracy and the frontier")
    source.add_argument("--adult", action="store_true", help="the source is the bundled Adult data (the release of "
                                                             "`duckanon -o adult_release.duckdb`)")
    parser.add_argument("--table", help="the table to read inside a DuckDB database file")
    parser.add_argument("--hierarchies", type=Path, metavar="DIR",
                        help="a folder of ARX hierarchies <column>.csv, for the frontier's searches")
    parser.add_argument("--label", help="the class column to measure classification accuracy with")
    population = parser.add_mutually_exclusive_group()
    population.add_argument("--sampling-fraction", type=values.share, metavar="F",
                            help="the source's records as a share of the population (0 < F <= 1)")
    population.add_argument("--population", metavar="FILE", help="a CSV, Parquet or JSON file of the population's "
                                                                  "records")
    parser.add_argument("--frontier", type=values.numbers, metavar="V1,V2,…",
                        help="values of --frontier-parameter to search the optimum for, e.g. 2,5,10,20,50")
    parser.add_argument("--frontier-parameter", default="k", metavar="NAME",
                        help="the models' parameter the frontier varies (default %(default)s; l, t, ...)")
    parser.add_argument("--metric", default="loss", help="the metric the frontier's optima minimize (default "
                                                        "%(default)s)")
    parser.add_argument("--threshold", type=values.share, default=0.2, metavar="R",
                        help="a record is at risk when its risk exceeds R (default %(default)s)")
    parser.add_argument("--custodian-view", action="store_true",
                        help="show the source's own values beside the release (by default the source is shown only "
                             "in the release's categories, small counts withheld); the page says it is not to be "
                             "passed on")
    parser.add_argument("--public-key", type=Path, metavar="KEYFILE",
                        help="the custodian's Ed25519 public key: the verdict also checks the release's signature")
    parser.add_argument("--noise-epsilon", type=values.number, metavar="EPSILON",
                        help="with --source: also the source's class sizes with differential-privacy noise at this "
                             "ε, spent from the source's privacy budget (the dp extra)")
    parser.add_argument("--ledger", type=Path, metavar="DATABASE",
                        help="with --noise-epsilon: the DuckDB file keeping the source's privacy budget and spends")
    parser.add_argument("--tables", type=Path, metavar="FILE.duckdb",
                        help="also write the figures as report_* tables into this DuckDB file (the release itself is "
                             "never written to)")


def _hierarchy_command(commands, name: str, help_text: str) -> Parser:
    parser = commands.add_parser(name, help=help_text, description=help_text, **_formatted())
    parser.add_argument("source", help="a DuckDB database file (with --table), or a CSV, Parquet or JSON file")
    parser.add_argument("--table", help="the table to read inside a DuckDB database file")
    parser.add_argument("--column", required=True, help="the column whose distinct values the hierarchy covers")
    parser.add_argument("--name", help="the hierarchy's name (default: the column's)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("-o", "--output", type=Path, metavar="FILE.csv", help="write an ARX-format CSV file")
    target.add_argument("--into", type=Path, metavar="DATABASE",
                        help="store it in a DuckDB database file as table anon.hierarchy_<name>")
    return parser


def build_parser() -> Parser:
    parser = Parser(prog="duckanon", description=DESCRIPTION, **_formatted())
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    common, bundled, policy, search, events = _common(), _source(bundled=True), _policy(), _search(), _events()

    def command(name: str, help_text: str, *parents: Parser) -> Parser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=[common, *parents],
                                   **_formatted())

    command("search", "search the full-domain generalizations for the best one satisfying the policy, and publish it "
                      "(the default command)", bundled, events, policy, search, _output())
    command("check", "check a transformation (--levels, or the one the search finds) against the policy; write "
                     "nothing", bundled, events, policy, search)
    _mondrian_options(command("mondrian", "partition the records with Mondrian and publish the partitions",
                              bundled, policy, _output()))
    _cluster_options(command("cluster", "group similar records (semi-supervised, top-down or MDAV) and publish the "
                                        "groups", bundled, policy, _output()))
    _perturb_options(command("perturb", "publish perturbed values: empirical synthesis, additive noise or randomized "
                                        "response", bundled, _output(check_only=False)))
    stored = command("run", "search and publish with a policy stored in the database (anon.policies …)",
                     search, _output())
    stored.add_argument("source", metavar="DATABASE", help="a DuckDB database file holding the policy and the table")
    stored.add_argument("--policy", required=True, metavar="NAME", help="the stored policy's name")
    # A stored policy names columns, not a table (anon.policies has no table column): the user names it.
    stored.add_argument("--table", required=True, help="the table to anonymize")

    _report_options(command("report", "write an HTML report on a release: risk, utility and the privacy/utility "
                                      "frontier"))

    checked = command("verify", "verify a release from its rows alone: every guarantee it claims recomputed, its "
                                "content digest, and its signature with --public-key; exit 0 when all hold")
    checked.add_argument("release", metavar="RELEASE", help="a release written by duckanon (.duckdb, .parquet, .csv, "
                                                            "or a Spark release folder)")
    checked.add_argument("--public-key", type=Path, metavar="KEYFILE",
                         help="the custodian's Ed25519 public key (PEM or OpenSSH): the signature must be theirs")
    checked.add_argument("--format", choices=FORMATS, help="the release's format (default: by its extension)")
    exposed = command("exposure", "how exposed people are when one person has several records: the people in a "
                                  "class of fewer than K people, and those whose signature (the classes of all their "
                                  "records) fewer than K people share", _source(bundled=False), events)
    exposed.add_argument("--qi", action="append", required=True, metavar="COLUMN", help="a quasi-identifier")
    exposed.add_argument("--person", required=True, metavar="COLUMN", help="the column naming each record's person")
    exposed.add_argument("-k", "--k", type=values.whole, default=5, help="the k people must hide among (default 5)")
    risky = command("risk", "risk record by record, as sdcMicro measures it: SUDA2's minimal sample uniques (why "
                            "records are at risk) and the individual risk with sampling weights, with the global "
                            "risk", _source(bundled=False))
    risky.add_argument("--key", action="append", required=True, metavar="COLUMN", help="a key variable")
    risky.add_argument("--weight", metavar="COLUMN", help="the sampling weight column (positive numbers); without "
                                                          "it a record's risk is 1 / its key's records")
    risky.add_argument("--strata", action="append", default=[], metavar="COLUMN",
                       help="measure within each stratum of this column (region, survey wave)")
    risky.add_argument("--max-size", type=values.positive_whole, metavar="N",
                       help="SUDA2: the largest set of variables searched for sample uniques (default all)")
    risky.add_argument("--dis-fraction", type=values.number, default=0.01, metavar="F",
                       help="SUDA2: the sampling fraction DIS-SUDA assumes (default %(default)s)")
    risky.add_argument("--method", choices=["approx", "exact"], default="approx",
                       help="the individual risk's formula (sdcMicro's indivRisk; default %(default)s)")
    risky.add_argument("--top", type=values.positive_whole, default=10, metavar="N",
                       help="how many sets of variables to list that records are unique on (default %(default)s)")
    aggregated = command("aggregate", "a differentially private count, sum, mean or histogram of a source or a "
                                      "release (OpenDP's mechanisms; the dp extra), spent from its privacy budget",
                         _source(bundled=True))
    aggregated.add_argument("--statistic", required=True, choices=["count", "sum", "mean", "histogram"])
    aggregated.add_argument("--column", help="the column summed, averaged or counted per category")
    aggregated.add_argument("--bounds", type=values.number_pair, metavar="LOW:HIGH",
                            help="for sum and mean: each value is clamped to [LOW, HIGH]")
    aggregated.add_argument("--categories", type=values.names, metavar="A,B,…",
                            help="for histogram: the column's public categories (any other value counts as "
                                 "'(other)')")
    aggregated.add_argument("--epsilon", type=values.number, required=True, help="the privacy budget this spends")
    aggregated.add_argument("--delta", type=values.number, default=0.0, help="δ (gaussian only; default 0)")
    aggregated.add_argument("--mechanism", choices=["laplace", "gaussian"], default="laplace",
                            help="the noise (default %(default)s)")
    aggregated.add_argument("--ledger", type=Path, metavar="DATABASE",
                            help="a DuckDB file keeping each source's privacy budget and spends (see duckanon budget)")
    budget = command("budget", "declare a source's privacy budget (ε, δ) in a ledger, or show what its "
                               "differentially private releases spent", _source(bundled=True))
    budget.add_argument("--ledger", type=Path, required=True, metavar="DATABASE",
                        help="the DuckDB file keeping the budgets and spends (created if missing)")
    budget.add_argument("--epsilon", type=values.number, help="declare the source's total ε (with --delta)")
    budget.add_argument("--delta", type=values.number, default=0.0, help="the source's total δ (default 0)")
    keys = command("keygen", "write a new Ed25519 key pair for signing releases: KEYFILE (private, readable by you "
                             "only) and KEYFILE.pub (for recipients)")
    keys.add_argument("key", metavar="KEYFILE", type=Path, help="where to write the private key; neither it nor "
                                                                "KEYFILE.pub may exist")

    hierarchy = commands.add_parser("hierarchy", help="build a hierarchy from a column's values",
                                    description="build a hierarchy from a column's distinct values and write it as "
                                                "an ARX-format CSV file or into a database", **_formatted())
    builders = hierarchy.add_subparsers(dest="builder", metavar="BUILDER", required=True, parser_class=Parser)
    intervals = _hierarchy_command(builders, "intervals", "numeric intervals, finer levels first, then *")
    cuts = intervals.add_mutually_exclusive_group(required=True)
    cuts.add_argument("--widths", type=values.numbers, metavar="W1,W2,…",
                      help="nested interval widths, each a multiple of the one before, e.g. 5,10,20")
    cuts.add_argument("--cuts", action="append", type=values.numbers, metavar="C1,C2,…",
                      help="one level's cut points (repeat for coarser levels, each a subset of the one before)")
    intervals.add_argument("--origin", type=values.number, default=0.0,
                           help="where the widths' intervals start counting (default %(default)s)")
    redaction = _hierarchy_command(builders, "redaction", "redact one character a level from the right: "
                                                          "47677, 4767*, 476**, …, *")
    redaction.add_argument("--mask", default="*", help="the redaction character (default %(default)s)")
    _hierarchy_command(builders, "dates", "day, month, year, decade, *")
    coded = _hierarchy_command(builders, "top-bottom", "top and bottom coding: the values from --bottom to --top "
                                                       "kept, '< BOTTOM' below and '> TOP' above, then --widths' "
                                                       "intervals over the kept values, then *")
    coded.add_argument("--bottom", type=values.number, help="the bottom code: smaller values become '< BOTTOM'")
    coded.add_argument("--top", type=values.number, help="the top code: larger values become '> TOP'")
    coded.add_argument("--widths", type=values.numbers, metavar="W1,W2,…",
                       help="nested interval widths over the kept values, e.g. 5,10,20")
    coded.add_argument("--origin", type=values.number, default=0.0,
                       help="where the widths' intervals start counting (default %(default)s)")

    examples = commands.add_parser("example-data", help="write the files the README's examples read into a folder",
                                   description="write the files the README's examples read (people.duckdb, "
                                               "people.csv, age.csv, zip.csv, hier/, visits.parquet, "
                                               "applicants.parquet, adult.parquet) into FOLDER; a folder already "
                                               "holding one of them is refused", **_formatted())
    examples.add_argument("folder", metavar="FOLDER", nargs="?", default=Path("."), type=Path,
                          help="where to write them (default: the current folder)")
    return parser
