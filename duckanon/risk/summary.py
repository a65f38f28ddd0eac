"""The risk figures of a source and its release side by side, from their class-size histograms.

Prosecutor risk assumes the attacker knows the target is in the data: a record in a class of f records is picked with
probability 1/f.  Journalist risk assumes only that the target is in the population: 1/F, with F the class's size in
the population (counted in a population table, or estimated as f / sampling fraction).  Marketer risk is the share of
records an attacker who links every record gets right.  Population uniqueness estimates how many records are unique in
the population (:mod:`.population`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..deferred import pandas as pd
from . import population as estimators

Histogram = tuple[np.ndarray, np.ndarray]  # class sizes (ascending) and how many classes have each
SIDES = ("source", "release")


@dataclass
class RiskSummary:
    threshold: float
    sides: dict[str, dict[str, float]]  # per side, measure -> value
    population: dict[str, pd.DataFrame]  # per side, the estimators' table

    def prosecutor(self, side: str) -> dict[str, float]:
        """The side's prosecutor risk: of a person where people are counted, else of a record."""
        figures = self.sides[side]
        if PERSON_HIGHEST in figures:
            return {"highest": figures[PERSON_HIGHEST], "average": figures[PERSON_AVERAGE],
                    "records_at_risk": figures[PEOPLE_AT_RISK]}
        return {"highest": figures["highest prosecutor risk"], "average": figures["average prosecutor risk"],
                "records_at_risk": figures["records at risk (prosecutor)"]}

    @property
    def counts_people(self) -> bool:
        return any(PERSON_HIGHEST in figures for figures in self.sides.values())

    def table(self) -> pd.DataFrame:
        measures = list(dict.fromkeys(m for side in self.sides.values() for m in side))
        frame = pd.DataFrame({"measure": measures})
        for side in SIDES:
            if side in self.sides:
                frame[side] = [self.sides[side].get(m, np.nan) for m in measures]
        return frame

    def population_table(self) -> pd.DataFrame | None:
        if not self.population:
            return None
        frames = [table.assign(side=side) for side, table in self.population.items()]
        frame = pd.concat(frames, ignore_index=True)
        return frame[["side", *[c for c in frame.columns if c != "side"]]]


def summarize(released: Histogram, source: Histogram | None, *, threshold: float,
              population_records: int | None = None, source_pairs: tuple | None = None,
              release_pairs: tuple | None = None, people: Mapping[str, Histogram] | None = None,
              compatible: tuple[np.ndarray, np.ndarray, int] | None = None) -> RiskSummary:
    """Each side's figures: prosecutor and marketer risk, records and share at risk above ``threshold``, sample
    uniques; given the population's size, journalist risk and population uniqueness.  ``source_pairs`` and
    ``release_pairs`` (sample size, population size, classes) give a side's journalist risk from a population table
    instead of an estimate.  ``people``: per side, the sizes of its signature groups (how many people share a
    signature) under a policy that counts people, whose prosecutor risk is a person's.  ``compatible``: a release
    whose missing values match any value, counted per record (:func:`_compatible_figures`), replaces ``released``."""
    sides, tables = {}, {}
    if compatible is not None:
        sides["release"] = _compatible_figures(*compatible, threshold)
    for side, histogram in (("source", source), ("release", released)):
        if histogram is None or side in sides:
            continue
        sizes = estimators.ClassSizes(*histogram)
        figures = _sample_figures(sizes, threshold)
        if people and side in people:
            figures.update(_people_figures(estimators.ClassSizes(*people[side]), threshold))
        if population_records is not None and sizes.classes:
            pairs = source_pairs if side == "source" else release_pairs
            figures.update(_journalist(sizes, population_records, pairs, threshold))
            tables[side] = _uniqueness(sizes, population_records)
        sides[side] = figures
    return RiskSummary(threshold, sides, tables)


def _sample_figures(sizes: estimators.ClassSizes, threshold: float) -> dict[str, float]:
    prosecutor = estimators.prosecutor_risk(sizes, threshold)
    uniques = estimators.sample_uniqueness(sizes)
    return {
        "records": sizes.records, "classes": sizes.classes,
        "smallest class": int(sizes.sizes[0]) if sizes.classes else 0,
        "highest prosecutor risk": prosecutor.highest, "average prosecutor risk": prosecutor.average,
        "records at risk (prosecutor)": prosecutor.records_at_risk, "share at risk (prosecutor)": prosecutor.share_at_risk,
        "marketer risk": estimators.marketer_risk(sizes),
        "sample uniques": uniques.records, "share of sample uniques": uniques.share,
    }


def _compatible_figures(sizes: np.ndarray, records: np.ndarray, combinations: int, threshold: float
                        ) -> dict[str, float]:
    """The sample figures of a release whose missing values match any value (cell suppression), from how many records
    have each number of compatible records (``sizes``, ``records``; :func:`~.counting.compatible_histogram`): the
    prosecutor risk of :func:`~.population.compatible_prosecutor_risk` (marketer risk alike, its average); its classes
    are its ``combinations`` of values, a sample unique a record compatible with itself alone."""
    n = int(records.sum())
    prosecutor = estimators.compatible_prosecutor_risk(sizes, records, threshold)
    uniques = int(records[sizes == 1].sum())
    return {
        "records": n, "classes": combinations, "smallest class": int(sizes[0]) if n else 0,
        "highest prosecutor risk": prosecutor.highest, "average prosecutor risk": prosecutor.average,
        "records at risk (prosecutor)": prosecutor.records_at_risk,
        "share at risk (prosecutor)": prosecutor.share_at_risk, "marketer risk": prosecutor.average,
        "sample uniques": uniques, "share of sample uniques": uniques / n if n else 0.0,
    }


PERSON_HIGHEST, PERSON_AVERAGE = "highest prosecutor risk of a person", "average prosecutor risk of a person"
PEOPLE_AT_RISK = "people at risk (prosecutor)"


def _people_figures(groups: estimators.ClassSizes, threshold: float) -> dict[str, float]:
    """The prosecutor risk of people: a person is picked among those sharing their signature."""
    prosecutor = estimators.prosecutor_risk(groups, threshold)
    return {"people": groups.records, "signatures": groups.classes,
            "smallest signature group": int(groups.sizes[0]) if groups.classes else 0,
            PERSON_HIGHEST: prosecutor.highest, PERSON_AVERAGE: prosecutor.average,
            PEOPLE_AT_RISK: prosecutor.records_at_risk,
            "people alone in their signature": estimators.sample_uniqueness(groups).records}


def _journalist(sizes: estimators.ClassSizes, population_records: int, pairs, threshold: float) -> dict[str, float]:
    if pairs is not None:
        sample, population, counts = pairs
        risk = estimators.journalist_risk(np.repeat(sample, counts), np.repeat(population, counts), threshold)
        how = "population table"
    else:
        fraction = sizes.records / population_records
        per_class = np.repeat(sizes.sizes, sizes.counts)
        risk = estimators.journalist_risk(per_class, per_class / fraction, threshold)
        how = "estimated"
    return {f"highest journalist risk ({how})": risk.highest, f"average journalist risk ({how})": risk.average,
            f"records at risk (journalist, {how})": risk.records_at_risk}


def _uniqueness(sizes: estimators.ClassSizes, population_records: int) -> pd.DataFrame:
    rows = []
    for estimate in estimators.population_uniqueness(sizes, population_records):
        model = estimate.model if estimate.chosen_model is None else f"{estimate.model} ({estimate.chosen_model})"
        rows.append({"model": model, "population uniques": estimate.uniques, "share": estimate.share,
                     "applicable": estimate.applicable, "chosen by Dankar": estimate.chosen})
    return pd.DataFrame(rows)
