"""Every privacy model by its name, as stored policies (``anon.policy_models``, the SQL macros) and a release's info
name it, and a model rebuilt from its stored parameters."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy
from .differential import EDDifferentialPrivacy
from .models import (
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
from .profitability import (
    JournalistNoAttackProfitability,
    JournalistProfitability,
    ProsecutorNoAttackProfitability,
    ProsecutorProfitability,
)
from .thresholds import (
    AverageReidentificationRisk,
    PopulationUniqueness,
    SampleUniqueness,
)

MODELS: dict[str, type[PrivacyModel]] = {m.name: m for m in (
    KAnonymity, KMap, DeltaPresence, DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity, AlphaKAnonymity,
    PSensitiveKAnonymity, TCloseness, AlphaLDiversityKAnonymity, BasicBetaLikeness, EnhancedBetaLikeness,
    DeltaDisclosurePrivacy, AverageReidentificationRisk, SampleUniqueness, PopulationUniqueness,
    ProsecutorNoAttackProfitability, JournalistNoAttackProfitability, ProsecutorProfitability,
    JournalistProfitability, EDDifferentialPrivacy)}


def model_from_params(name: str, params: Mapping) -> PrivacyModel:
    """Rebuild a model stored by :meth:`PrivacyModel.params`."""
    if name not in MODELS:
        raise PolicyError(f"unknown privacy model {name!r}; known: {', '.join(MODELS)}")
    params = dict(params)
    if "hierarchy" in params:
        params["hierarchy"] = Hierarchy(params["hierarchy"], name=f"{params.get('sensitive')} (t-closeness)")
    return MODELS[name](**params)
