"""The bundled Adult hierarchy files read with plain csv, for tests that generalize in pandas."""

from __future__ import annotations

import csv

from duckanon.datasets import adult_hierarchy_dir


def arx_map(attribute: str, level: int) -> dict[str, str]:
    """The hierarchy file of ``attribute``: each value -> its level-``level`` generalization."""
    with open(adult_hierarchy_dir() / f"{attribute}.csv", newline="") as handle:
        return {row[0]: row[level] for row in csv.reader(handle, delimiter=";")}
