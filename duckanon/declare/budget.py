"""A privacy budget per source: the ε and δ a custodian allows all differentially private outputs of one source
together, and the ledger of what each spent, in the database's ``anon`` schema.

``anon.privacy_budgets`` holds one row per source that has a budget (its key, ε, δ); ``anon.privacy_spent`` one row
per differentially private release or query (its source's key, ε, δ, what it was, where it went, when).  Spends add
up (sequential composition: Dwork and Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Theorem
3.16), so an output is refused, before any work, when its ε or δ would take the source's total past its budget; the
refusal names what was spent.  A spend is recorded, in the same transaction as that check, before the mechanism
touches the data: an output that fails afterwards keeps its spend (the data was read under the guarantee), and two
outputs racing for the last of a budget cannot both pass.

A source's key is what names it: a file by its absolute path, a table by its name as given, any other relation by
its SQL (:func:`source_key`).  The ledger is the working database's, or a DuckDB file of its own (:func:`ledger_at`)
that several databases and the command line share.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import DuckDBEngine, Engine
from ..errors import PolicyError
from ..hierarchy.hierarchy import SCHEMA
from ..parameters import checked_number
from ..sqlgen import build as sb

BUDGETS = sb.table("privacy_budgets", SCHEMA)
SPENT = sb.table("privacy_spent", SCHEMA)
_COLUMNS = {
    BUDGETS.name: (("source", "VARCHAR"), ("epsilon", "DOUBLE"), ("delta", "DOUBLE"), ("declared", "TIMESTAMP")),
    SPENT.name: (("source", "VARCHAR"), ("epsilon", "DOUBLE"), ("delta", "DOUBLE"), ("output", "VARCHAR"),
                 ("target", "VARCHAR"), ("spent", "TIMESTAMP")),
}
# Budgets are compared after summing floats: a spend that meets the budget exactly must pass.
_TOLERANCE = 1e-12


@dataclass(frozen=True)
class PrivacyBudget:
    """A source's budget (None: none declared) and what its outputs spent so far."""

    source: str
    epsilon: float | None
    delta: float | None
    spent_epsilon: float
    spent_delta: float
    outputs: int

    def summary(self) -> str:
        spent = f"spent ε = {self.spent_epsilon:g}, δ = {self.spent_delta:g} in {_outputs(self.outputs)}"
        if self.epsilon is None:
            return f"{self.source}: no budget declared; {spent}"
        return f"{self.source}: budget ε = {self.epsilon:g}, δ = {self.delta:g}; {spent}"


def source_key(source: object) -> str:
    """What names a source in the ledger: a file (or folder of Parquet parts) by its absolute path, a table by its
    name, another relation by its SQL; a source named and the relation it names (a file's reader, a table) alike."""
    if isinstance(source, exp.Table):
        if isinstance(source.this, exp.Anonymous) and len(source.this.expressions) == 1 \
                and isinstance(source.this.expressions[0], exp.Literal):
            read = source.this.expressions[0].this  # a file as a reader reads it (a folder as its parts): its path
            return source_key(read.removesuffix("/*.parquet"))
        if not source.args.get("db") and not source.args.get("catalog"):
            return source.name  # a table of the database: by its name, as given by name
    if isinstance(source, exp.Expression):
        return sb.to_sql(source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return str(path.resolve()) if isinstance(source, os.PathLike) or path.exists() else str(source)
    raise PolicyError(f"a privacy budget is kept per named source (a table, a file, a relation), not per "
                      f"{type(source).__name__}")


def _checked(epsilon: object, delta: object, owner: str) -> tuple[float, float]:
    return (float(checked_number(epsilon, "epsilon", owner, low=0, low_open=True)),
            float(checked_number(delta, "delta", owner, low=0, high=1, high_open=True)))


class Ledger:
    """The budgets and spends of one database's ``anon`` schema (created on first use)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        engine.run(exp.Create(this=sb.ident(SCHEMA), kind="SCHEMA", exists=True))
        for table in (BUDGETS, SPENT):
            engine.run(exp.Create(this=exp.Schema(this=table.copy(), expressions=[
                exp.ColumnDef(this=sb.ident(c), kind=exp.DataType.build(kind)) for c, kind in _COLUMNS[table.name]]),
                kind="TABLE", exists=True))

    def declare(self, source: str, epsilon: float, delta: float = 0.0) -> PrivacyBudget:
        """Set ``source``'s budget (replacing one declared before); refused below what its outputs already spent."""
        epsilon, delta = _checked(epsilon, delta, "privacy budget")
        with self.engine.transaction():
            state = self.state(source)
            if state.spent_epsilon > epsilon + _TOLERANCE or state.spent_delta > delta + _TOLERANCE:
                raise PolicyError(f"privacy budget of {source!r}: ε = {epsilon:g}, δ = {delta:g} is below what "
                                  f"{_outputs(state.outputs)} already spent (ε = {state.spent_epsilon:g}, "
                                  f"δ = {state.spent_delta:g})")
            self.engine.run(exp.delete(BUDGETS.copy(), where=sb.col("source").eq(sb.lit(source))))
            self.engine.run(exp.insert(exp.values([(source, epsilon, delta, _now())]), BUDGETS.copy()))
        return self.state(source)

    def state(self, source: str) -> PrivacyBudget:
        budget = self.engine.rows(exp.select(sb.col("epsilon"), sb.col("delta")).from_(BUDGETS.copy())
                                  .where(sb.col("source").eq(sb.lit(source))))
        spent = self.engine.rows(exp.select(exp.func("COALESCE", exp.func("SUM", sb.col("epsilon")), sb.lit(0.0)),
                                            exp.func("COALESCE", exp.func("SUM", sb.col("delta")), sb.lit(0.0)),
                                            exp.func("COUNT", exp.Star()))
                                 .from_(SPENT.copy()).where(sb.col("source").eq(sb.lit(source))))[0]
        epsilon, delta = budget[0] if budget else (None, None)
        return PrivacyBudget(source, epsilon, delta, float(spent[0]), float(spent[1]), int(spent[2]))

    def spend(self, source: str, epsilon: float, delta: float, output: str, target: str | None) -> PrivacyBudget:
        """Record an output's spend, or refuse it when it would exceed the source's budget (nothing recorded)."""
        with self.engine.transaction():
            state = self.state(source)
            if state.epsilon is not None and (
                    state.spent_epsilon + epsilon > state.epsilon + _TOLERANCE
                    or state.spent_delta + delta > state.delta + _TOLERANCE):
                left = (max(state.epsilon - state.spent_epsilon, 0.0), max(state.delta - state.spent_delta, 0.0))
                raise PolicyError(
                    f"privacy budget of {source!r} exceeded: {output} needs ε = {epsilon:g}, δ = {delta:g}, but "
                    f"{_outputs(state.outputs)} already spent ε = {state.spent_epsilon:g}, δ = {state.spent_delta:g} "
                    f"of the budget ε = {state.epsilon:g}, δ = {state.delta:g} (left: ε = {left[0]:g}, "
                    f"δ = {left[1]:g}); see Anonymizer.privacy_spent")
            self.engine.run(exp.insert(exp.values([(source, epsilon, delta, output, target, _now())]),
                                       SPENT.copy()))
        return self.state(source)

    def spent(self, source: str | None = None) -> pd.DataFrame:
        """The ledger's rows (of ``source``, or all), oldest first."""
        query = exp.select(exp.Star()).from_(SPENT.copy()).order_by(sb.col("spent"))
        if source is not None:
            query = query.where(sb.col("source").eq(sb.lit(source)))
        return self.engine.frame(query)


def _outputs(count: int) -> str:
    return f"{count} output" + ("" if count == 1 else "s")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


@contextlib.contextmanager
def ledger_at(engine: Engine | None, path: str | os.PathLike | None = None) -> Iterator[Ledger]:
    """The ledger of ``engine``'s database, or of the DuckDB file ``path`` (created if missing; opened for the
    block only), which several databases and the command line can share."""
    if path is None:
        if not isinstance(engine, DuckDBEngine):
            raise PolicyError("the privacy ledger is kept in a DuckDB database (its budget is checked and spent in one "
                              "transaction): give ledger=, a DuckDB file")
        yield Ledger(engine)
        return
    with duckdb.connect(str(path)) as connection:
        yield Ledger(DuckDBEngine(connection))
