"""Parts the experiments share: how useful a (generalized) table is to a classifier, and printing result tables."""

from __future__ import annotations

import pandas as pd

MISSING = "<missing>"


def classifier_accuracy(frame: pd.DataFrame, features: list[str], label: str, *, folds: int = 3,
                        seed: int = 0) -> dict[str, float]:
    """Mean accuracy, over ``folds``-fold stratified cross-validation, of a logistic regression and a decision tree
    predicting ``label`` from ``features``.

    Every feature is one-hot encoded as a category, raw numbers included: generalized values are labels such as
    ``[30-40)`` or ``*``, and treating original and generalized tables alike keeps their accuracies comparable.
    The encoder is fit inside each fold; a category a test fold has and its training folds lack encodes as all
    zeros.  Missing values are a category of their own.
    """
    try:
        from sklearn.model_selection import StratifiedKFold, cross_val_score
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder
        from sklearn.tree import DecisionTreeClassifier
    except ImportError as error:
        raise ImportError("classifier_accuracy needs scikit-learn, part of duckanon's `eval` extra: "
                          "pip install 'duckanon[eval]'") from error
    absent = [c for c in [*features, label] if c not in frame.columns]
    if absent:
        raise ValueError(f"columns not in the frame: {absent!r}; it has {list(frame.columns)!r}")
    if frame[label].isna().any():
        raise ValueError(f"label {label!r} is missing in {int(frame[label].isna().sum())} records")
    categories = frame[features].astype("string").fillna(MISSING).to_numpy(dtype=object)
    target = frame[label].to_numpy()
    splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    classifiers = {
        "logistic_regression": LogisticRegression(max_iter=1000),
        "decision_tree": DecisionTreeClassifier(random_state=seed),
    }
    return {
        name: float(cross_val_score(make_pipeline(OneHotEncoder(handle_unknown="ignore"), classifier),
                                    categories, target, cv=splits, scoring="accuracy").mean())
        for name, classifier in classifiers.items()
    }


def markdown_table(frame: pd.DataFrame, *, digits: int = 4) -> str:
    """``frame`` as a GitHub-flavoured Markdown table (index left out), floats to ``digits`` decimals."""
    def cell(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            text = ""
        elif isinstance(value, float):
            text = f"{value:.{digits}f}"
        else:
            text = str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    header = [cell(c) for c in frame.columns]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]
    rule = ["---:" if is_number else "---" for is_number in numeric]
    rows = [[cell(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, rule, *rows])
