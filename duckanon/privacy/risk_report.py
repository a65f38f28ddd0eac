"""The prosecutor risk of a set of equivalence classes (an encoded source at some levels, or any
:class:`~duckanon.privacy.classes.Classes`): the figures :meth:`duckanon.session.Anonymizer.risk` reports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine
from ..risk.population import ClassSizes, prosecutor_risk
from ..sqlgen import build as sb
from .classes import SIZE, Classes
from .people import PEOPLE, group_sizes


@dataclass
class RiskReport:
    """Prosecutor re-identification risk: an attacker who knows a target is in the data picks among its class.  Under
    a policy that counts people (``unit`` "people"), among the people sharing the target's signature: ``records``
    then counts people, ``classes`` signature groups, and the histogram's ``class_size`` the people of a group."""

    records: int
    classes: int
    highest_risk: float
    average_risk: float
    threshold: int
    records_below_threshold: int  # records in classes of fewer than ``threshold``
    histogram: pd.DataFrame  # class_size, classes, records
    unit: str = "records"

    @property
    def share_below_threshold(self) -> float:
        return self.records_below_threshold / self.records if self.records else 0.0


def risk(engine: Engine, classes: Classes, *, threshold: int = 5) -> RiskReport:
    """The classes' sizes counted in SQL, and :func:`~.population.prosecutor_risk` of them; a record is below
    ``threshold`` (a class size) when its risk 1/size exceeds 1/threshold."""
    size = sb.col(SIZE)
    rows = engine.rows(exp.select(size, exp.func("COUNT", exp.Star())).from_(classes.sizes().subquery("sizes"))
                       .group_by(size).order_by(size))
    return _report(rows, threshold, "records")


def person_risk(engine: Engine, classes: Classes, person: str, *, threshold: int = 5,
                record_table: str | None = None) -> RiskReport:
    """:func:`risk` of people: a person's risk is 1 / the people who share their signature (the groups' sizes
    counted in SQL, :func:`~.people.group_sizes`); a person is below ``threshold`` when fewer share it."""
    groups = group_sizes(classes, person, record_table).subquery("groups")
    rows = engine.rows(exp.select(sb.col(PEOPLE), exp.func("COUNT", exp.Star())).from_(groups)
                       .group_by(sb.col(PEOPLE)).order_by(sb.col(PEOPLE)))
    return _report(rows, threshold, "people")


def _report(rows: list[tuple], threshold: int, unit: str) -> RiskReport:
    """The report of ``rows`` of (a size in records or people, the classes or signature groups of that size)."""
    sizes = np.array([r[0] for r in rows], dtype=np.int64)
    counts = np.array([r[1] for r in rows], dtype=np.int64)
    prosecutor = prosecutor_risk(ClassSizes(sizes, counts), 1.0 / threshold)
    return RiskReport(records=int((sizes * counts).sum()), classes=int(counts.sum()), highest_risk=prosecutor.highest,
                      average_risk=prosecutor.average, threshold=threshold,
                      records_below_threshold=prosecutor.records_at_risk,
                      histogram=pd.DataFrame({"class_size": sizes, "classes": counts, "records": sizes * counts}),
                      unit=unit)
