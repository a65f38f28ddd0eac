"""The catalog: hierarchies and policies stored as tables of the database's ``anon`` schema.

A hierarchy ``name`` is table ``anon.hierarchy_<name>`` (one row per leaf, :meth:`Hierarchy.store`); a policy is rows
of ``anon.policies``, ``anon.policy_columns``, ``anon.policy_models`` and ``anon.policy_methods``
(:meth:`Policy.to_rows`, :meth:`Policy.method_rows`), which SQL users
write too (``sql/duckanon_catalog.sql``).  A hierarchy given inline in a policy is stored under its column's name, or
reused when an equal one is stored already.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import AnonymizationError, PolicyError
from ..hierarchy.hierarchy import SCHEMA, Hierarchy, level_column
from ..sqlgen import build as sb
from .policy import PERSON_ROLE, RECORD_TABLE_ROLE, Policy

POLICY_TABLES = {
    "policies": ("name", "suppression", "suppression_limit", "max_suppressed", "others", "created"),
    "policy_columns": ("policy", "column_name", "role", "hierarchy_table"),
    "policy_models": ("policy", "position", "model", "sensitive", "params"),
    # The parameters (JSON) of each column released transformed (pseudonymize, mask, date-shift): never a key.
    "policy_methods": ("policy", "column_name", "params"),
}


def hierarchy_table(name: str) -> exp.Table:
    """The table that stores hierarchy ``name``."""
    return sb.table(f"hierarchy_{name}", SCHEMA)


def relation_exists(engine: Engine, relation: exp.Expression) -> bool:
    return engine.exists(relation)


class Catalog:
    """The ``anon`` schema of an engine's database, created with its policy tables when missing."""

    def __init__(self, engine: Engine):
        self.engine = engine
        engine.run(exp.Create(this=sb.ident(SCHEMA), kind="SCHEMA", exists=True))
        for name, columns in POLICY_TABLES.items():
            engine.run(exp.Create(this=exp.Schema(this=sb.table(name, SCHEMA), expressions=[
                exp.ColumnDef(this=sb.ident(c), kind=exp.DataType.build("VARCHAR")) for c in columns]),
                kind="TABLE", exists=True))

    # ------------------------------------------------------------ hierarchies
    def add_hierarchy(self, name: str, hierarchy: Hierarchy) -> str:
        """Store ``hierarchy`` as table ``anon.hierarchy_<name>`` (replacing one of that name); returns the name."""
        hierarchy.store(self.engine, hierarchy_table(name).name)
        return name

    def has_hierarchy(self, name: str) -> bool:
        return relation_exists(self.engine, hierarchy_table(name))

    def hierarchy(self, name: str) -> Hierarchy:
        table = hierarchy_table(name).name
        if not self.has_hierarchy(name):
            raise AnonymizationError(f"no hierarchy named {name!r} (table anon.{table})")
        return Hierarchy.from_table(self.engine, table, name=name)

    def add_arx_hierarchies(self, directory: str | os.PathLike, names: Sequence[str] | None = None) -> list[str]:
        """Store every ``<name>.csv`` (ARX format) of a folder as hierarchy ``<name>``."""
        files = sorted(Path(directory).glob("*.csv"))
        chosen = [f for f in files if names is None or f.stem in names]
        return [self.add_hierarchy(f.stem, Hierarchy.from_arx_csv(f, name=f.stem)) for f in chosen]

    def stored(self, given: Mapping[str, Hierarchy | str]) -> dict[str, tuple[Hierarchy, exp.Table]]:
        """Each column's hierarchy (a Hierarchy, or a stored hierarchy's name) with the table that stores it.

        An inline hierarchy gets the column's name (characters other than letters, digits and _ made _) unless a
        different hierarchy already holds it; an equal stored one is reused rather than rewritten.  The stored tables it may reuse are read once, in one query."""
        for column, hierarchy in given.items():
            if not isinstance(hierarchy, (Hierarchy, str)):
                raise PolicyError(f"the hierarchy of {column!r} must be a Hierarchy or a stored hierarchy's name, "
                                  f"got {type(hierarchy).__name__}")
        # Named portably (Spark's catalog takes letters, digits and _ only); a clash falls back on the hashed name.
        names = {c: [portable := re.sub(r"\W", "_", c, flags=re.ASCII),
                     f"{portable}_{hashlib.sha1(json.dumps(h.rows).encode()).hexdigest()[:10]}"]
                 for c, h in given.items() if isinstance(h, Hierarchy)}
        stored = self._stored_rows([n for candidates in names.values() for n in candidates])
        found = {}
        for column, hierarchy in given.items():
            if isinstance(hierarchy, str):
                found[column] = (self.hierarchy(hierarchy), hierarchy_table(hierarchy))
                continue
            rows = set(hierarchy.rows)
            same = lambda name: stored.get(name) == rows  # noqa: E731 - rows are unique by their leaf
            name, hashed = names[column]
            if name in stored and not same(name):
                name = hashed
            if not same(name):
                name = self._store_shared(name, hashed, hierarchy, rows)
            found[column] = (hierarchy, hierarchy_table(name))
        return found

    def _store_shared(self, name: str, hashed: str, hierarchy: Hierarchy, rows: set[tuple]) -> str:
        """Store an inline hierarchy as ``name``; returns the name it is stored under.  Another cursor storing one at
        the same moment makes DuckDB refuse ours (a write-write conflict): its rows are then read, and if they are
        ours there is nothing to do, else ours goes under ``hashed``."""
        for attempt in range(3):
            try:
                self.add_hierarchy(name, hierarchy)
                return name
            except duckdb.TransactionException:
                if self._stored_rows([name]).get(name) == rows:
                    return name
                name = hashed
                time.sleep(0.01 * (attempt + 1))
        self.add_hierarchy(name, hierarchy)
        return name

    def _stored_rows(self, names: Sequence[str]) -> dict[str, set[tuple]]:
        """The rows of those of the hierarchies ``names`` that are stored: one catalog query, then one query reading
        them all."""
        if not names:
            return {}
        tables = {hierarchy_table(n).name: n for n in names}
        widths = self.engine.table_widths(SCHEMA, list(tables))
        if not widths:
            return {}
        widest = max(widths.values())
        reads = [exp.select(sb.lit(table).as_("__table", quoted=True),
                            *[sb.col(level_column(j)) if j < width else
                              exp.cast(exp.Null(), "VARCHAR").as_(level_column(j), quoted=True) for j in range(widest)])
                 .from_(sb.table(table, SCHEMA)) for table, width in widths.items()]
        union = reads[0]
        for read in reads[1:]:
            union = exp.union(union, read, distinct=False, copy=False)
        rows: dict[str, set[tuple]] = {tables[t]: set() for t in widths}
        for table, *values in self.engine.rows(union):
            rows[tables[table]].add(tuple(values[:widths[table]]))
        return rows

    # --------------------------------------------------------------- policies
    def save_policy(self, name: str, policy: Policy) -> None:
        """Store a policy as rows of anon.policies, anon.policy_columns, anon.policy_models and anon.policy_methods."""
        tables = {c: self.stored({c: h})[c][1] for c, h in policy.quasi_identifiers.items() if h is not None}
        columns, models, settings = policy.to_rows({c: t.name for c, t in tables.items()})
        with self.engine.transaction():
            self._delete_policy(name)
            maximum = settings["max_suppressed"]
            self._insert("policies", [(name, settings["suppression"], str(settings["suppression_limit"]),
                                       None if maximum is None else str(maximum), settings["others"],
                                       dt.datetime.now(dt.timezone.utc).isoformat())])
            self._insert("policy_columns", [(name, *row) for row in columns])
            self._insert("policy_models", [(name, str(i), model, sensitive, params)
                                           for i, model, sensitive, params in models])
            self._insert("policy_methods", [(name, *row) for row in policy.method_rows()])

    def policy(self, name: str) -> Policy:
        """The policy stored as ``name``.  Rows written by hand or from SQL (sql/duckanon.sql) are checked as they are
        read: a value that is not valid is a PolicyError naming the policy and the value."""
        settings = self._rows("policies", name)
        if not settings:
            raise AnonymizationError(f"no policy named {name!r}")
        try:
            if len(settings) > 1:
                raise PolicyError(f"it has {len(settings)} rows in anon.policies; delete all but one")
            _, suppression, limit, maximum, others, _created = settings[0]
            columns = [row[1:] for row in self._rows("policy_columns", name)]
            models = [(int(row[1]), *row[2:]) for row in self._rows("policy_models", name)]
            hierarchies = {c: Hierarchy.from_table(self.engine, table, name=c) for c, role, table in columns
                           if role == "quasi-identifier" and table is not None}
            policy = Policy.from_rows(columns, models, {"suppression": suppression, "suppression_limit": limit,
                                                        "max_suppressed": None if maximum is None else int(maximum),
                                                        "others": others}, hierarchies,
                                      [row[1:] for row in self._rows("policy_methods", name)])
            unknown = [(c, role) for c, role, _table in columns
                       if role not in (PERSON_ROLE, RECORD_TABLE_ROLE) and policy.role(c) != role]
            if unknown:  # Policy.from_rows skips a role it does not know: the column would lose its role
                raise PolicyError(f"column {unknown[0][0]!r} has the unknown role {unknown[0][1]!r}")
        except (ValueError, TypeError, *self.engine.catalog_errors) as error:
            shown = f"{error} in {error.doc!r}" if isinstance(error, json.JSONDecodeError) else str(error)
            raise PolicyError(f"policy {name!r} as stored is not valid: {shown}") from error
        return policy

    def policies(self) -> pd.DataFrame:
        return self.engine.frame(exp.select(exp.Star()).from_(sb.table("policies", SCHEMA)).order_by("name"))

    def _rows(self, table: str, policy: str) -> list[tuple]:
        column = "name" if table == "policies" else "policy"
        return self.engine.rows(exp.select(*[sb.col(c) for c in POLICY_TABLES[table]])
                                .from_(sb.table(table, SCHEMA)).where(sb.col(column).eq(sb.lit(policy))))

    def _insert(self, table: str, rows: list[tuple]) -> None:
        if rows:
            width = len(POLICY_TABLES[table])
            statement = exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(width))]),
                                   sb.table(table, SCHEMA), columns=list(POLICY_TABLES[table]))
            self.engine.run_many(statement, rows)

    def _delete_policy(self, name: str) -> None:
        for table in POLICY_TABLES:
            column = "name" if table == "policies" else "policy"
            self.engine.run(exp.delete(sb.table(table, SCHEMA), where=sb.col(column).eq(sb.lit(name))))
