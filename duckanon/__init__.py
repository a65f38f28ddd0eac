"""duckanon: DuckDB as an anonymization engine.

Hierarchies are DuckDB tables, generalizations compile to SQL, privacy models are GROUP BY queries, and a release is a
separate database file that the DuckDB shell and BI tools open.
"""

from .anonymizer import Anonymizer, EncodedSource, Release, connect
from .checks import CheckReport, RiskReport
from .errors import AnonymizationError, HierarchyError, PolicyError, PolicyNotSatisfied, ReleaseCheckFailed
from .hierarchy import Hierarchy, IntervalHierarchy
from .models import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    PrivacyModel,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from .metrics import (AverageClassSize, Discernibility, Loss, Metric, NonUniformEntropy,
                      NormalizedCertaintyPenalty)
from .mondrian import MondrianResult
from .policy import Policy
from .recoding import Assignment, PartitionMap
from .search import SearchResult
from .clustering import SemiSupervisedClustering
from .grouping import Clusters
from .microaggregation import MDAV
from .personalized import Personalization, TopDownPartitioning
from .disclosure import DisclosureReport
from .perturbation import AdditiveNoise, EmpiricalSynthesis, PerturbedRelease, RandomizedResponse

__version__ = "0.1.0"

__all__ = [
    "AlphaKAnonymity", "AlphaLDiversityKAnonymity", "AnonymizationError", "Anonymizer", "Assignment", "AverageClassSize",
    "CheckReport", "Discernibility", "DistinctLDiversity", "EncodedSource", "EntropyLDiversity", "Hierarchy",
    "HierarchyError", "IntervalHierarchy", "KAnonymity", "Loss", "Metric", "MondrianResult", "NonUniformEntropy",
    "NormalizedCertaintyPenalty", "PartitionMap", "Policy", "PolicyError", "PolicyNotSatisfied", "PrivacyModel",
    "PSensitiveKAnonymity", "RecursiveCLDiversity", "Release", "ReleaseCheckFailed", "RiskReport", "SearchResult",
    "TCloseness", "connect",
]
__all__ += ["AdditiveNoise", "DisclosureReport", "EmpiricalSynthesis", "PerturbedRelease", "RandomizedResponse"]
__all__ += ["Clusters", "MDAV", "Personalization", "SemiSupervisedClustering", "TopDownPartitioning"]
