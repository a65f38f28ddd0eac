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
    RandomizedResponse,
)
from .privacy.checks import CheckReport
from .privacy.disclosure import DisclosureReport
from .privacy.models import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    KAnonymity,
    PrivacyModel,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from .recode.recoding import Assignment, PartitionMap
from .release.files import read_release_info
from .release.publish import Release
from .release.verify import Verification, verify
from .risk.classes import RiskReport
from .search.strategies import SearchResult
from .session import Anonymizer, connect
from .utility.metrics import (
    ArxLoss,
    ArxNonMonotoneEntropy,
    ArxNonUniformEntropy,
    AverageClassSize,
    Discernibility,
    DiscernibilityStar,
    Loss,
    Metric,
    NonUniformEntropy,
    NormalizedCertaintyPenalty,
)

__all__ = [
    "AlphaKAnonymity", "AlphaLDiversityKAnonymity", "AnonymizationError", "Anonymizer", "Assignment", "AverageClassSize",
    "CheckReport", "Discernibility", "DistinctLDiversity", "EncodedSource", "EntropyLDiversity", "Hierarchy",
    "HierarchyError", "IntervalHierarchy", "KAnonymity", "Loss", "Metric", "MondrianResult", "NonUniformEntropy",
    "NormalizedCertaintyPenalty", "PartitionMap", "Policy", "PolicyError", "PolicyNotSatisfied", "PrivacyModel",
    "PSensitiveKAnonymity", "RecursiveCLDiversity", "Release", "ReleaseCheckFailed", "RiskReport", "SearchResult",
    "TCloseness", "__version__", "connect",
]
__all__ += ["AdditiveNoise", "DisclosureReport", "EmpiricalSynthesis", "PerturbedRelease", "RandomizedResponse"]
__all__ += ["DigestMismatch", "GuaranteeFails", "NotARelease", "SignatureMismatch", "SigningKeyError", "Verification",
            "VerificationFailed", "WrongKey", "read_release_info", "verify"]
__all__ += ["Clusters", "MDAV", "Personalization", "SemiSupervisedClustering", "TopDownPartitioning"]
__all__ += ["ArxLoss", "ArxNonMonotoneEntropy", "ArxNonUniformEntropy", "BasicBetaLikeness", "DeltaDisclosurePrivacy",
            "DiscernibilityStar", "EnhancedBetaLikeness"]
