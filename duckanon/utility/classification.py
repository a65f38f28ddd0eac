"""How useful a table is to a classifier: seed 000's measure (cross-validated accuracy on the table itself) and seed
004's (a classifier trained on the release, tested on original records).  Needs scikit-learn, in the ``eval`` extra."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..deferred import pandas as pd
from ..errors import MissingExtra

MISSING = "<missing>"
EXTRA = "from a checkout: pip install '.[eval]'"


def _sklearn():
    try:
        import sklearn  # noqa: F401
    except ImportError as error:
        raise MissingExtra(f"classification accuracy needs scikit-learn, part of duckanon's `eval` extra: {EXTRA}"
                          ) from error


def classifier_accuracy(frame: pd.DataFrame, features: list[str], label: str, *, numeric: Sequence[str] = (),
                        folds: int = 3, seed: int = 0) -> dict[str, float]:
    """Mean accuracy, over ``folds``-fold stratified cross-validation, of a logistic regression and a decision tree
    predicting ``label`` from ``features``.

    Every feature is one-hot encoded as a category, raw numbers included, unless it is named in ``numeric``:
    generalized values are labels such as ``[30-40)`` or ``*``, and treating original and generalized tables alike
    keeps their accuracies comparable.  Perturbed numbers (``numeric``) are scaled numbers instead.  The encoders are
    fit inside each fold; a category a test fold has and its training folds lack encodes as all zeros.  Missing
    values are a category of their own.
    """
    _sklearn()
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    _require_columns(frame, features, label)
    splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    table = _features(frame, features, numeric)
    return {name: float(cross_val_score(_model(features, numeric, classifier), table, frame[label].to_numpy(),
                                        cv=splits, scoring="accuracy").mean())
            for name, classifier in _classifiers(seed).items()}


def trained_on_release_accuracy(release: pd.DataFrame, original: pd.DataFrame, features: list[str], label: str, *,
                                numeric: Sequence[str] = (), seed: int = 0) -> dict[str, float]:
    """Seed 004's measure: accuracy on the ``original`` records of classifiers trained on the ``release`` (features
    encoded as :func:`classifier_accuracy` encodes them)."""
    _sklearn()
    _require_columns(release, features, label)
    _require_columns(original, features, label)
    scores = {}
    for name, classifier in _classifiers(seed).items():
        model = _model(features, numeric, classifier).fit(_features(release, features, numeric),
                                                          release[label].to_numpy())
        predicted = model.predict(_features(original, features, numeric))
        scores[name] = float(np.mean(predicted == original[label].to_numpy()))
    return scores


def _features(frame: pd.DataFrame, features: list[str], numeric: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: frame[c].astype(float) if c in numeric else
                         frame[c].astype("string").fillna(MISSING).astype(object) for c in features})


def _model(features: list[str], numeric: Sequence[str], classifier):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numbers = [c for c in features if c in numeric]
    categories = [c for c in features if c not in numeric]
    return make_pipeline(ColumnTransformer([("numbers", StandardScaler(), numbers),
                                            ("categories", OneHotEncoder(handle_unknown="ignore"), categories)]),
                         classifier)


def _classifiers(seed: int) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier
    return {"logistic_regression": LogisticRegression(max_iter=1000),
            "decision_tree": DecisionTreeClassifier(random_state=seed)}


def _require_columns(frame: pd.DataFrame, features: list[str], label: str) -> None:
    absent = [c for c in [*features, label] if c not in frame.columns]
    if absent:
        raise ValueError(f"columns not in the frame: {absent!r}; it has {list(frame.columns)!r}")
    if frame[label].isna().any():
        raise ValueError(f"label {label!r} is missing in {int(frame[label].isna().sum())} records")
