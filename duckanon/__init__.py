"""duckanon: DuckDB as an anonymization engine.

Hierarchies are DuckDB tables, generalizations compile to SQL, privacy models are GROUP BY queries, and a release is a
separate database file that the DuckDB shell and BI tools open.
"""

from ._version import __version__
from .session import Anonymizer, connect
from .encode.binding import EncodedSource
from .release.publish import Release
from .privacy.checks import CheckReport, RiskReport
from .errors import AnonymizationError, HierarchyError, PolicyError, PolicyNotSatisfied, ReleaseCheckFailed
from .declare.hierarchy import Hierarchy, IntervalHierarchy
from .privacy.models import (
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
from .utility.metrics import (AverageClassSize, Discernibility, Loss, Metric, NonUniformEntropy,
                      NormalizedCertaintyPenalty)
from .partition.mondrian import MondrianResult
from .declare.policy import Policy
from .recode.recoding import Assignment, PartitionMap
from .search.strategies import SearchResult
from .cluster.semisupervised import SemiSupervisedClustering
from .cluster.grouping import Clusters
from .cluster.mdav import MDAV
from .cluster.personalized import Personalization, TopDownPartitioning
from .privacy.disclosure import DisclosureReport
from .perturb.perturbation import AdditiveNoise, EmpiricalSynthesis, PerturbedRelease, RandomizedResponse


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
