"""duckanon: DuckDB as an anonymization engine.

Hierarchies are DuckDB tables, generalizations compile to SQL, privacy models are GROUP BY queries, and a release is a
separate database file that the DuckDB shell and BI tools open.
"""

from ._version import __version__
from .cluster.grouping import Clusters
from .cluster.mdav import MDAV
from .cluster.personalized import Personalization, TopDownPartitioning
from .cluster.semisupervised import SemiSupervisedClustering
from .declare.policy import Policy
from .encode.binding import EncodedSource
from .encode.tables import Tables
from .errors import (
    AnonymizationError,
    DigestMismatch,
    GuaranteeFails,
    HierarchyError,
    NotARelease,
    PolicyError,
    PolicyNotSatisfied,
    ReleaseCheckFailed,
    SignatureMismatch,
    SigningKeyError,
    VerificationFailed,
    WrongKey,
)
from .hierarchy.hierarchy import Hierarchy, IntervalHierarchy
from .partition.mondrian import MondrianResult
from .perturb.perturbation import (
    AdditiveNoise,
    EmpiricalSynthesis,
    PerturbedRelease,
    Pram,
    RandomizedResponse,
)
from .privacy.checks import CheckReport
from .privacy.differential import EDDifferentialPrivacy
from .privacy.disclosure import DisclosureReport
from .privacy.people import PersonExposure
from .privacy.models import (
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
from .privacy.profitability import (
    JournalistNoAttackProfitability,
    JournalistProfitability,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
)
from .privacy.risk_report import RiskReport
from .privacy.thresholds import (
    AverageReidentificationRisk,
    PopulationUniqueness,
    SampleUniqueness,
)
from .recode.protect import DateShift, Mask, Pseudonymize
from .recode.recoding import Assignment, PartitionMap
from .release.files import read_release_info
from .release.publish import Release
from .release.verify import Verification, verify
from .search.strategies import SearchResult
from .session import Anonymizer, connect
from .utility.metrics import (
    ArxKLDivergence,
    ArxLoss,
    ArxNonMonotoneEntropy,
    ArxNonUniformEntropy,
    ArxPublisherPayout,
    AverageClassSize,
    Discernibility,
    DiscernibilityStar,
    Loss,
    Metric,
    NonUniformEntropy,
    NormalizedCertaintyPenalty,
)

__all__ = [
    "AdditiveNoise", "AlphaKAnonymity", "AlphaLDiversityKAnonymity", "AnonymizationError", "Anonymizer", "ArxKLDivergence", "ArxLoss",
    "ArxNonMonotoneEntropy", "ArxNonUniformEntropy", "ArxPublisherPayout", "Assignment", "AverageClassSize",
    "AverageReidentificationRisk", "BasicBetaLikeness", "CheckReport", "Clusters", "connect",
    "DateShift", "DeltaDisclosurePrivacy", "DeltaPresence", "DigestMismatch", "Discernibility", "DiscernibilityStar",
    "DisclosureReport", "DistinctLDiversity", "EDDifferentialPrivacy", "EmpiricalSynthesis", "EncodedSource", "EnhancedBetaLikeness",
    "EntropyLDiversity", "GuaranteeFails", "Hierarchy", "HierarchyError", "IntervalHierarchy",
    "JournalistNoAttackProfitability", "JournalistProfitability", "KAnonymity", "KMap", "Loss", "Mask", "MDAV", "Metric",
    "MondrianResult",
    "NonUniformEntropy", "NormalizedCertaintyPenalty", "NotARelease", "PartitionMap", "PersonExposure", "Personalization",
    "PerturbedRelease", "Policy", "PolicyError", "PolicyNotSatisfied", "PopulationUniqueness", "PrivacyModel",
    "ProsecutorNoAttackProfitability", "ProsecutorProfitability", "Pseudonymize", "Pram", "PSensitiveKAnonymity", "RandomizedResponse",
    "read_release_info",
    "RecursiveCLDiversity", "Release", "ReleaseCheckFailed", "RiskReport", "SampleUniqueness", "SearchResult",
    "SemiSupervisedClustering", "SignatureMismatch", "SigningKeyError", "Tables", "TCloseness", "TopDownPartitioning",
    "Verification", "VerificationFailed", "verify", "WrongKey", "__version__",
]
