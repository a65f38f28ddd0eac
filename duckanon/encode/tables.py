"""Several tables of one set of people, released together: a person table and event tables joined by a key.

``Tables({"patients": "patients", "visits": "visits.parquet"}, key="patient_id")`` is a source wherever one is taken
(check, search, anonymize, publish).  The tables are stacked into one relation, each row with the name of its table
in column :data:`RECORD_TABLE` and NULL in the columns its table lacks (a NULL stays NULL on every level of a
hierarchy, so it forms no class with a value).  A column of one name in several tables is one column: one role, one
hierarchy and one level, so it is generalized alike in every table.  The policy counts people by the key: a person's
signature is the set of their (table, class) pairs, which k people must share, and a person suppressed loses every
record in every table (their records show '*' in the quasi-identifiers their table holds, NULL in the others).  A
model over a sensitive column (the l-diversity forms) judges the classes of the tables that hold that column.  The key
keeps its role (pseudonymized, it gets one pseudonym in every table).

A DuckDB release holds the stacked rows as its table and one view per source table (its columns, its rows), which BI
tools join by the key; a Parquet release is a folder of one file per source table.

Refused before any work, naming the table and column: a table without the key, a key or a shared column whose type
differs between tables, a NULL key, a person table that holds a key twice, and event records whose key the person
table lacks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from ..declare.policy import Policy
from ..engine import Engine
from ..errors import PolicyError
from ..privacy.people import PersonExposure, person_exposure
from ..sqlgen import build as sb
from .sources import source_relation

RECORD_TABLE = "__duckanon_table"  # each stacked row's table


@dataclass(frozen=True)
class Stacked:
    """Tables stacked into one relation: the relation, each table's columns (in its own order), the key."""

    relation: exp.Expression
    columns: dict[str, list[str]]
    key: str

    def policy(self, policy: Policy) -> Policy:
        """``policy`` as it applies to the stacked rows: counting people by the key, telling tables apart by
        :data:`RECORD_TABLE` (released as it is).  A policy naming another person column is refused."""
        if policy.person not in (None, self.key):
            raise PolicyError(f"the tables are joined by {self.key!r}, but the policy counts people by "
                              f"{policy.person!r}: a release of several tables counts people by their key")
        if policy.suppression == "replace-unchecked":
            raise PolicyError("suppression 'replace-unchecked' (ARX's semantics, for one table) leaves the '*' class "
                              "out of the checks; a release of several tables suppresses by 'replace' or 'drop'")
        return dataclasses.replace(policy, person=self.key, insensitive=[*policy.insensitive, RECORD_TABLE],
                                   record_table=RECORD_TABLE)


@dataclass(frozen=True)
class Tables:
    """A person table (the first, unless ``person_table`` names another: one row per person) and event tables, each
    a source as a single table is (a table name, a file path, a sqlglot expression), joined by column ``key``."""

    tables: Mapping[str, object]
    key: str
    person_table: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "tables", dict(self.tables))
        if len(self.tables) < 2:
            raise PolicyError(f"Tables needs a person table and at least one event table, got {list(self.tables)}")
        folded: dict[str, str] = {}
        for name in self.tables:
            if not isinstance(name, str) or not name.strip():
                raise PolicyError(f"a table of Tables is named by a non-empty string, got {name!r}")
            if name.startswith((".", "_")) or any(c in name for c in '/\\:\0'):
                # Names become the files of a Parquet release, which readers skip when hidden.
                raise PolicyError(f"table name {name!r}: a table's name names its file in a Parquet release, so it "
                                  f"neither starts with '.' or '_' nor holds '/', '\\', ':' or NUL")
            if name.lower() in folded:  # names become views and files, matched without case by DuckDB and some disks
                raise PolicyError(f"tables {folded[name.lower()]!r} and {name!r} differ only in case")
            folded[name.lower()] = name
        if not isinstance(self.key, str) or not self.key:
            raise PolicyError(f"Tables needs the name of the key column that joins them, got {self.key!r}")
        person_table = next(iter(self.tables)) if self.person_table is None else self.person_table
        if person_table not in self.tables:
            raise PolicyError(f"person_table {person_table!r} is not one of the tables {list(self.tables)}")
        object.__setattr__(self, "person_table", person_table)

    def stack(self, engine: Engine) -> Stacked:
        """The tables stacked into one relation, after the checks of the module's text."""
        relations = {name: source_relation(engine, source) for name, source in self.tables.items()}
        types = {name: engine.types(relation) for name, relation in relations.items()}
        column_types: dict[str, tuple[str, str]] = {}  # column -> (its type, the first table that has it)
        for name, table_types in types.items():
            if self.key not in table_types:
                raise PolicyError(f"table {name!r} has no column {self.key!r}, the key that joins the tables; it has "
                                  f"{list(table_types)}")
            if RECORD_TABLE in table_types:
                raise PolicyError(f"table {name!r} has a column {RECORD_TABLE!r}, the name a release of several "
                                  f"tables gives each record's table: rename it")
            for column, column_type in table_types.items():
                first_type, first = column_types.setdefault(column, (column_type, name))
                if column_type != first_type:
                    what = "the key" if column == self.key else "column"
                    raise PolicyError(f"{what} {column!r} is {first_type} in table {first!r} but {column_type} in "
                                      f"table {name!r}: a column of several tables is one column of the release, "
                                      f"of one type (cast it in one of them)")
        # The person table first: its keys, known non-NULL, are what the others' keys are looked up in.
        for name in sorted(relations, key=lambda n: n != self.person_table):
            self._check_keys(engine, name, relations[name], relations[self.person_table])
        parts = []
        for name, relation in relations.items():
            columns = [sb.col(c) if c in types[name] else exp.cast(exp.Null(), exp.DataType.build(
                column_type, dialect=engine.dialect, udt=True)).as_(c, quoted=True)
                for c, (column_type, _) in column_types.items()]
            parts.append(exp.select(*columns, sb.lit(name).as_(RECORD_TABLE, quoted=True)).from_(
                sb.derived(relation, "t")))
        stacked = parts[0]
        for part in parts[1:]:
            stacked = exp.union(stacked, part, distinct=False)
        return Stacked(stacked.subquery(), {name: list(t) for name, t in types.items()}, self.key)

    def _check_keys(self, engine: Engine, name: str, relation: exp.Expression, people: exp.Expression) -> None:
        key = sb.col(self.key)
        (nulls,), = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(sb.derived(relation, "r")).where(
            key.is_(exp.Null())))
        if nulls:
            raise PolicyError(f"the key {self.key!r} is NULL in {nulls} records of table {name!r}: each record needs "
                              f"its person")
        if name == self.person_table:
            (repeated,), = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(
                exp.select(key.copy()).from_(sb.derived(relation, "r")).group_by(key.copy()).having(
                    exp.func("COUNT", exp.Star()) > sb.lit(1)).subquery("repeated")))
            if repeated:
                raise PolicyError(f"the person table {name!r} holds {repeated} keys ({self.key!r}) more than once: it "
                                  f"has one row per person")
            return
        known = exp.select(sb.col(self.key, "p")).from_(sb.derived(people, "p"))
        (orphans, people_missing), = engine.rows(exp.select(
            exp.func("COUNT", exp.Star()), exp.func("COUNT", exp.Distinct(expressions=[key.copy()]))).from_(
            sb.derived(relation, "r")).where(exp.not_(exp.In(this=key.copy(), query=known.subquery()))))
        if orphans:
            raise PolicyError(f"table {name!r}: {orphans} records of {people_missing} people have a key "
                              f"({self.key!r}) the person table {self.person_table!r} does not hold")


def exposure(engine: Engine, source, quasi: list[str], person: str, k: int) -> PersonExposure:
    """:func:`~duckanon.privacy.people.person_exposure` of a source, or of :class:`Tables` stacked, where a class is
    one table's combination of values (so a signature is of (table, class) pairs) and the key names the person."""
    if not isinstance(source, Tables):
        return person_exposure(engine, source_relation(engine, source), quasi, person, k)
    if person != source.key:
        raise PolicyError(f"the tables are joined by {source.key!r}: their people are named by it, not {person!r}")
    return person_exposure(engine, source.stack(engine).relation, [*quasi, RECORD_TABLE], person, k)
