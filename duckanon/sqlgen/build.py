"""Small builders over sqlglot expression trees.

Every statement duckanon runs is built here as a tree: identifiers are quoted by sqlglot and values become literals,
so a column called ``a"; DROP TABLE x`` is a name, never SQL.  The same trees transpile to Spark SQL and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlglot import exp

DIALECT = "duckdb"
PORTABLE_DIALECTS = ("spark", "postgres")


NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL", "NUMERIC")


def is_numeric_type(type_name: str) -> bool:
    """Whether a column of this engine type name holds numbers."""
    return type_name.upper().startswith(NUMERIC_TYPES)


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table(name: str, schema: str | None = None, catalog: str | None = None) -> exp.Table:
    return exp.Table(
        this=ident(name),
        db=ident(schema) if schema else None,
        catalog=ident(catalog) if catalog else None,
    )


def derived(relation: exp.Expression, alias: str) -> exp.Expression:
    """``relation`` under ``alias``, to select from: a table aliased, a query as a derived table.

    A query that is already a derived table is re-aliased rather than wrapped: ``FROM ((SELECT …) AS a) AS b`` is
    rejected by every DuckDB but 2.0.0.
    """
    while isinstance(relation, exp.Subquery) and not any(v for k, v in relation.args.items() if k not in ("this", "alias")):
        relation = relation.this
    if isinstance(relation, exp.Query):
        return relation.subquery(alias)
    return exp.alias_(relation, alias, quoted=True)


def lit(value: object) -> exp.Expression:
    """A literal for a Python value (NULL for None)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def length_prefixed(value: exp.Expression) -> exp.Expression:
    """``value``'s text prefixed by its length and a colon (``5:hello``), ``-`` for NULL: texts that, concatenated,
    stay apart (``ab``+``c`` is not ``a``+``bc``; NULL is not the text ``-``)."""
    text = exp.cast(value, exp.DataType.build("VARCHAR"))
    # length by name: sqlglot's own node for it differs between its versions.
    counted = concatenated([exp.cast(exp.Anonymous(this="length", expressions=[text.copy()]),
                                     exp.DataType.build("VARCHAR")), lit(":"), text.copy()])
    return exp.Case().when(value.copy().is_(exp.Null()), lit("-")).else_(counted)


def concatenated(parts: Sequence[exp.Expression]) -> exp.Expression:
    """The texts ``parts`` joined (none of them NULL)."""
    return parts[0] if len(parts) == 1 else exp.Concat(expressions=list(parts), safe=False)


def and_all(conditions: Iterable[exp.Expression]) -> exp.Expression:
    conditions = list(conditions)
    return exp.and_(*conditions) if conditions else exp.true()


def or_all(conditions: Iterable[exp.Expression]) -> exp.Expression:
    conditions = list(conditions)
    return exp.or_(*conditions) if conditions else exp.false()


def null_safe_join(left: str, right: str, keys: Sequence[str]) -> exp.Expression:
    """Join condition that treats NULL keys as equal, as GROUP BY does."""
    return and_all(exp.NullSafeEQ(this=col(k, left), expression=col(k, right)) for k in keys)


def as_text(expression: exp.Expression) -> exp.Expression:
    return exp.cast(expression, exp.DataType.build("VARCHAR"))


def as_double(expression: exp.Expression) -> exp.Expression:
    return exp.cast(expression, exp.DataType.build("DOUBLE"))


def create_table_as(target: exp.Table, query: exp.Expression, *, temporary: bool = False,
                    replace: bool = False) -> exp.Create:
    properties = exp.Properties(expressions=[exp.TemporaryProperty()]) if temporary else None
    return exp.Create(this=target, kind="TABLE", expression=query, replace=replace, properties=properties)


def create_view_as(target: exp.Table, query: exp.Expression) -> exp.Create:
    return exp.Create(this=target, kind="VIEW", expression=query)


def drop(kind: str, target: exp.Table) -> exp.Drop:
    # sqlglot before 28 generates a DROP's ``this``, later versions its ``tables``: both are given.
    return exp.Drop(this=target.copy(), tables=[target], kind=kind, exists=True)


def to_sql(statement: exp.Expression, dialect: str = DIALECT) -> str:
    """The statement as text, for messages and tests; engines run trees (:mod:`duckanon.engine`)."""
    return statement.sql(dialect=dialect)
