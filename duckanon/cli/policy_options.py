"""A policy from command-line options: roles, privacy models and suppression; the bundled data's defaults."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import datasets
from ..declare.policy import Policy
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import Hierarchy
from ..privacy.differential import EDDifferentialPrivacy
from ..privacy.models import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DeltaPresence,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    KAnonymity,
    KMap,
    PrivacyModel,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from ..privacy.profitability import (
    JournalistNoAttackProfitability,
    JournalistProfitability,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
)
from ..privacy.thresholds import (
    AverageReidentificationRisk,
    PopulationUniqueness,
    SampleUniqueness,
)
from ..recode.protect import DateShift, Pseudonymize
from ..session import Anonymizer

BUNDLED_K = 5
BUNDLED_SUPPRESSION_LIMIT = 0.05
BUNDLED_SENSITIVE = "salary-class"


def bundled_defaults(args: argparse.Namespace) -> None:
    """The bundled Adult job: eight quasi-identifiers with ARX's hierarchies, salary-class sensitive, the other
    columns dropped, k = 5 unless -k is given (other models are added to it), at most 5 % suppressed."""
    private = bool(getattr(args, "differential_privacy", None))
    if not args.qi:
        # Under differential privacy every released column is a quasi-identifier (as ARX's SafePub tests on Adult).
        args.qi = [(q, None) for q in datasets.ADULT_QUASI_IDENTIFIERS if private or q != BUNDLED_SENSITIVE]
        args.hierarchies = args.hierarchies or datasets.adult_hierarchy_dir()
        args.sensitive = args.sensitive or ([] if private else [BUNDLED_SENSITIVE])
        args.others = "drop"
    if private:  # SafePub derives its own k and suppresses what it asks
        return
    if args.k is None:
        args.k = BUNDLED_K
    if args.suppression_limit is None:
        args.suppression_limit = BUNDLED_SUPPRESSION_LIMIT
    if getattr(args, "label", None) is None and getattr(args, "metric", None) == "mi-loss":
        args.label = BUNDLED_SENSITIVE


def models(args: argparse.Namespace) -> list[PrivacyModel]:
    k = args.k
    chosen: list[PrivacyModel] = [KAnonymity(k)] if k is not None else []
    if (args.alpha_k or args.alpha_k_values or args.p_sensitive or args.alpha_l_k) and k is None:
        raise AnonymizationError("--alpha-k, --alpha-k-values, --alpha-l-k and --p-sensitive need -k")
    if args.alpha_l_k and args.sensitivity_levels is None:
        raise AnonymizationError("--alpha-l-k needs --sensitivity-levels VALUE=LEVEL,…")
    chosen += [DistinctLDiversity(column, l) for column, l in args.l_diversity]
    chosen += [EntropyLDiversity(column, l, estimator) for column, l, estimator in args.entropy_l]
    chosen += [RecursiveCLDiversity(column, c, l) for column, c, l in args.recursive_l]
    chosen += [AlphaKAnonymity(column, alpha, k) for column, alpha in args.alpha_k]
    chosen += [AlphaKAnonymity(column, alpha, k, highly_sensitive=values.split(","))
               for column, alpha, values in args.alpha_k_values]
    chosen += [PSensitiveKAnonymity(column, p, k) for column, p in args.p_sensitive]
    chosen += [AlphaLDiversityKAnonymity(column, alpha, l, k, args.sensitivity_levels)
               for column, alpha, l in args.alpha_l_k]
    chosen += [TCloseness(column, t, distance) for column, t, distance in args.t_closeness]
    chosen += [(EnhancedBetaLikeness if variant == "enhanced" else BasicBetaLikeness)(column, beta)
               for column, beta, variant in args.beta_likeness]
    chosen += [DeltaDisclosurePrivacy(column, delta) for column, delta in args.delta_disclosure]
    counted = [k for k, size, _, _ in args.k_map if size is None]
    if (counted or args.delta_presence) and args.population is None:
        raise AnonymizationError("--delta-presence and --k-map K (without a population size) need --population")
    chosen += [KMap(k, size, significance, estimator) for k, size, significance, estimator in args.k_map
               if size is not None]
    chosen += [KMap(k, population=args.population) for k in counted]
    chosen += [DeltaPresence(low, high, args.population, arx_size_first=arx)
               for low, high, arx in args.delta_presence]
    if any(journalist for _, _, journalist in args.no_attack) and args.population is None:
        raise AnonymizationError("--no-attack GAIN:COST:journalist needs --population")
    chosen += [JournalistNoAttackProfitability(gain, cost, args.population) if journalist
               else ProsecutorNoAttackProfitability(gain, cost) for gain, cost, journalist in args.no_attack]
    if any(journalist for _, journalist in args.profitability) and args.population is None:
        raise AnonymizationError("--profitability COST:GAIN:LOSS:BENEFIT:journalist needs --population")
    chosen += [JournalistProfitability(**terms, population=args.population) if journalist
               else ProsecutorProfitability(**terms) for terms, journalist in args.profitability]
    chosen += [EDDifferentialPrivacy(epsilon, delta, steps, search)
               for epsilon, delta, steps, search in args.differential_privacy]
    chosen += [AverageReidentificationRisk(*given) for given in args.average_risk]
    chosen += [SampleUniqueness(share) for share in args.sample_uniqueness]
    chosen += [PopulationUniqueness(share, size, estimator) for share, size, estimator in args.population_uniqueness]
    if not chosen:
        raise AnonymizationError("give at least one privacy model, e.g. -k 5")
    return chosen


def hierarchy(anon: Anonymizer, column: str, file: Path | None, folder: Path | None,
              required: bool) -> Hierarchy | str | None:
    """The quasi-identifier's hierarchy: its file, ``<column>.csv`` in ``folder``, or one stored in the database.
    None when there is none and none is ``required`` (partitioning cuts such a column on its values)."""
    if file is not None:
        if not file.is_file():
            raise AnonymizationError(f"--qi {column}={file}: no such file")
        return Hierarchy.from_arx_csv(file, name=column)
    if folder is not None and (folder / f"{column}.csv").is_file():
        return Hierarchy.from_arx_csv(folder / f"{column}.csv", name=column)
    if anon.has_hierarchy(column):
        return column
    if not required:
        return None
    raise AnonymizationError(f"no hierarchy for quasi-identifier {column!r}: give --qi {column}=FILE.csv, "
                             f"--hierarchies DIR holding {column}.csv, or store one in the database "
                             f"(duckanon hierarchy … --into DATABASE)")


def policy(anon: Anonymizer, args: argparse.Namespace, *, hierarchies_required: bool = True) -> Policy:
    if args.hierarchies is not None and not args.hierarchies.is_dir():
        raise AnonymizationError(f"--hierarchies {str(args.hierarchies)!r} is not a folder")
    quasi = {column: hierarchy(anon, column, file, args.hierarchies, hierarchies_required) for column, file in args.qi}
    if not quasi:
        raise AnonymizationError("name the quasi-identifiers with --qi COLUMN[=HIERARCHY.csv]")
    key = args.pseudonym_key
    return Policy(quasi_identifiers=quasi, models=models(args), identifiers=args.identifier,
                  sensitive=args.sensitive, insensitive=args.insensitive, others=args.others,
                  suppression=args.suppression, suppression_limit=args.suppression_limit,
                  max_suppressed=args.max_suppressed,
                  pseudonymize={column: Pseudonymize(key) for column in args.pseudonymize}, mask=dict(args.mask),
                  date_shift={column: DateShift(days, by, key) for column, (days, by) in args.date_shift},
                  strata=args.stratum, person=args.person)
