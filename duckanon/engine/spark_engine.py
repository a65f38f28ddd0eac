"""Apache Spark as an engine: the same statement trees, generated in Spark SQL and run by a SparkSession.

Nothing of duckanon runs on the executors: every step is SQL, so a cluster needs only Spark itself.  What Spark SQL
lacks is rewritten here, tree to tree, before the Spark generator runs:

- a temporary table (``CREATE TEMPORARY TABLE … AS``) becomes Parquet files in a scratch folder read as a temporary
  view: the frequency table and the partitioning rounds read it many times, and a plain view would compute it again
  each time; dropping it drops the view and deletes the files;
- ``CREATE OR REPLACE TABLE`` on the session catalog becomes ``DROP TABLE IF EXISTS`` and ``CREATE TABLE``;

pyspark is the optional extra ``spark`` (from a checkout ``pip install ".[spark]"``); Spark 4 needs Java 17 or newer.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..errors import AnonymizationError
from ..sqlgen import build as sb
from .base import Engine, Frame, Prepared, Statement

INSTALL_HINT = 'install the extra "spark" (from a checkout: pip install ".[spark]")'
_serial = itertools.count()

# Spark's type names as DuckDB writes them: the rest of duckanon reads types in one vocabulary.
_TYPE_NAMES = {"tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT", "float": "FLOAT",
               "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE",
               "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP", "binary": "BLOB"}


def _pyspark():
    try:
        import pyspark.sql
    except ImportError as error:
        raise AnonymizationError(f"running on Spark needs pyspark: {INSTALL_HINT}") from error
    return pyspark.sql


def require_java() -> None:
    """Spark 4 runs on Java 17 or newer; without one pyspark fails with a gateway error that names neither."""
    home = os.environ.get("JAVA_HOME")
    if (home and os.access(os.path.join(home, "bin", "java"), os.X_OK)) or shutil.which("java"):
        return
    raise AnonymizationError("running on Spark needs Java 17 or newer, and none was found: install a JDK or JRE "
                             "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME")


def spark_session(master: str = "local[2]", app_name: str = "duckanon", **config: str):
    """A SparkSession for duckanon (the active one's settings apply when one is running): ``master`` as Spark
    takes it (``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://…``), ``config`` as ``spark.*`` settings."""
    sql = _pyspark()
    require_java()
    builder = sql.SparkSession.builder.master(master).appName(app_name)
    defaults = {"spark.ui.showConsoleProgress": "false", "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.session.timeZone": "UTC"}
    if master.startswith("local"):
        # Without a metastore, local Spark's catalog lives as long as the session, but its tables' files would stay
        # in ./spark-warehouse and block the next session's tables of the same name.
        defaults["spark.sql.warehouse.dir"] = tempfile.mkdtemp(prefix="duckanon-warehouse-")
    for key, value in {**defaults, **config}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    # Spark warns of every window without PARTITION BY (numbering the small frequency table is one): errors only.
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkEngine(Engine):
    """An engine over a SparkSession (``session``, for what only Spark offers: reading and writing files)."""

    dialect = "spark"

    def __init__(self, session=None, scratch: str | None = None):
        self.session = session if session is not None else spark_session()
        self.catalog_errors = (_pyspark().utils.AnalysisException,)
        # Temporary tables are Parquet files here: on a cluster, a folder every executor reaches (HDFS, S3, …).
        self.scratch = scratch or self.session.conf.get("spark.duckanon.scratch", None) or tempfile.mkdtemp(
            prefix="duckanon-spark-")
        self._materialized: dict[str, str] = {}  # temporary table → the folder holding its rows
        self._files: dict[str, str] = {}  # view → the file it reads

    # ------------------------------------------------------------------ statements
    def prepare(self, statement: exp.Expression) -> Prepared:
        if _temporary_table(statement):
            return _PreparedTable(statement.expression.sql(dialect=self.dialect), statement.this.name)
        if _replaced_table(statement):
            raise AnonymizationError("CREATE OR REPLACE TABLE runs on Spark in two steps and cannot be prepared")
        return Prepared(statement.sql(dialect=self.dialect))

    def _execute(self, statement: Statement, parameters: Sequence[object] | None = None):
        """The statement run: a query's DataFrame (Spark runs queries lazily, when their rows are taken), or for a
        temporary table, as in DuckDB, its number of rows, counted only when taken (a job of its own, which
        :meth:`run` never pays)."""
        if isinstance(statement, exp.Expression):
            if _temporary_table(statement):
                statement = self.prepare(statement)
            elif _new_schema(statement) and self._catalog_in_memory():
                statement = self._located(statement)
            elif _replaced_table(statement):
                target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
                self._sql(sb.drop("TABLE", target.copy()).sql(dialect=self.dialect))
                statement = statement.copy()
                statement.set("replace", False)
            elif _dropped_temporary(statement, self._materialized):
                self._release(statement.args["tables"][0].name)
                return []
            elif _renamed_temporary(statement, self._materialized):
                folder = self._materialized[statement.this.name]
                self._release(statement.this.name, keep_rows=True)
                self._keep(statement.args["actions"][0].this.name, folder)
                return []
        if isinstance(statement, _PreparedTable):
            folder = self._scratch_folder(statement.table)
            self._sql(statement, parameters).write.parquet(folder)
            self._release(statement.table)
            return self._keep(statement.table, folder).groupBy().count()
        text = statement if isinstance(statement, Prepared) else statement.sql(dialect=self.dialect)
        return self._sql(text, parameters)

    def _catalog_in_memory(self) -> bool:
        return self.session.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory"

    def _located(self, create: exp.Create) -> exp.Create:
        """A schema of an in-memory catalog, located in this engine's scratch folder: in the default warehouse its
        folder outlives the session, and the next session's CREATE SCHEMA fails on it (LOCATION_ALREADY_EXISTS)."""
        located = create.copy()
        folder = os.path.join(self.scratch, f"schema-{create.this.name}-{uuid.uuid4().hex}")
        located.set("properties", exp.Properties(expressions=[exp.LocationProperty(this=sb.lit(folder))]))
        return located

    def _sql(self, text: str, parameters: Sequence[object] | None = None):
        return self.session.sql(text, args=list(parameters)) if parameters else self.session.sql(text)

    def _scratch_folder(self, table: str) -> str:
        # Spark skips paths that start with _ or . as hidden.
        return f"{self.scratch.rstrip('/')}/{table.lstrip('_.')}-{uuid.uuid4().hex}"

    def _keep(self, name: str, folder: str):
        """A temporary table: rows computed once and written to ``folder``, then read as the view ``name`` (returned
        as a DataFrame).  Files, not a cached plan: a cached or checkpointed plan carries what Spark inferred of the
        plans it came from, which over Mondrian's rounds grows until planning alone exhausts the driver's memory."""
        frame = self.session.read.parquet(folder)
        frame.createOrReplaceTempView(name)
        self._materialized[name] = folder
        return frame

    def _release(self, name: str, *, keep_rows: bool = False) -> None:
        folder = self._materialized.pop(name, None)
        if folder is not None:
            self.session.catalog.dropTempView(name)
            if not keep_rows:
                self._remove_folder(folder)

    def _remove_folder(self, folder: str) -> None:
        jvm = self.session.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(folder)
        path.getFileSystem(self.session.sparkContext._jsc.hadoopConfiguration()).delete(path, True)

    def run(self, statement, parameters=None) -> None:
        self._execute(statement, parameters)

    def rows(self, query, parameters=None) -> list[tuple]:
        result = self._execute(query, parameters)
        return result if isinstance(result, list) else [tuple(row) for row in result.collect()]

    def frame(self, query) -> pd.DataFrame:
        return self._execute(query).toPandas()

    def arrays(self, query) -> dict[str, np.ndarray]:
        table = self._execute(query).toArrow()
        arrays = {}
        for name, column in zip(table.column_names, table.columns):
            values = column.to_numpy(zero_copy_only=False)
            if column.null_count:
                values = np.ma.masked_array(values, mask=column.is_null().to_numpy(zero_copy_only=False))
            arrays[name] = values
        return arrays

    def types(self, relation: exp.Expression) -> dict[str, str]:
        query = relation if isinstance(relation, exp.Query) else exp.select(exp.Star()).from_(relation)
        schema = self._execute(query.limit(0)).schema
        return {field.name: _TYPE_NAMES.get(field.dataType.simpleString(), field.dataType.simpleString().upper())
                for field in schema.fields}

    def run_many(self, statement: exp.Expression, rows: Sequence[Sequence[object]]) -> None:
        # Spark runs one job per statement: the rows go in as one statement, from a frame of them.
        insert = statement
        if not isinstance(insert, exp.Insert) or not isinstance(insert.expression, exp.Values):
            raise AnonymizationError(f"Spark runs many rows only as INSERT … VALUES, not {statement.key}")
        columns = [c.name for c in insert.this.expressions] if isinstance(insert.this, exp.Schema) else None
        width = len(insert.expression.expressions[0].expressions)
        frame = pd.DataFrame([list(r) for r in rows], columns=columns or [f"c{i}" for i in range(width)], dtype=object)
        with self.registered(frame) as values:
            self.run(exp.insert(exp.select(exp.Star()).from_(values), insert.this.copy()))

    def register(self, name: str, frame: Frame) -> None:
        frame = pd.DataFrame(frame, copy=False) if isinstance(frame, Mapping) else frame
        types = _pyspark().types
        schema = types.StructType([types.StructField(str(c), _spark_type(frame[c], types)) for c in frame.columns])
        # As Python objects (pandas boxes NumPy scalars) with None for missing values, which Spark's schema takes.
        rows = frame.astype(object).where(frame.notna(), None).to_numpy().tolist()
        self.session.createDataFrame(rows, schema=schema).createOrReplaceTempView(name)

    def unregister(self, name: str) -> None:
        self.session.catalog.dropTempView(name)

    def _view(self, dataframe, name: str | None = None) -> exp.Table:
        """A Spark DataFrame readable as a table of this engine (a temporary view of the session)."""
        name = name or f"__duckanon_source_{next(_serial)}"
        dataframe.createOrReplaceTempView(name)
        return exp.Table(this=exp.to_identifier(name, quoted=True))

    def table_widths(self, schema: str, names: Sequence[str]) -> dict[str, int]:
        # Asked of the catalog and of each table's schema: listing tables or columns runs Spark jobs, these do not.
        catalog = self.session.catalog
        if not catalog.databaseExists(schema):
            return {}
        qualified = {name: sb.table(name, schema).sql(dialect=self.dialect) for name in names}
        return {name: len(self.session.table(table).columns) for name, table in qualified.items()
                if catalog.tableExists(table)}

    def native_relation(self, source: object) -> exp.Expression | None:
        return self._view(source) if isinstance(source, _pyspark().DataFrame) else None

    def protected_paths(self, sources: Sequence[exp.Expression]) -> dict[str, str]:
        read = {table.name for source in sources for table in source.find_all(exp.Table)}
        return {path: f"source file {path!r}" for name, path in self._files.items() if name in read}

    def write_parquet(self, query: exp.Expression, path: str) -> None:
        self._execute(query).write.parquet(path)

    def read_file(self, path: str, kind: str) -> exp.Table:
        # A local path is the caller's, relative to this process's folder (Spark's JVM may have started elsewhere).
        path = path if "://" in path else os.path.abspath(path)
        reader = self.session.read
        if kind in ("csv", "tsv"):
            dataframe = reader.options(header=True, inferSchema=True, sep="\t" if kind == "tsv" else ",").csv(path)
        else:
            dataframe = reader.format(kind).load(path)
        view = self._view(dataframe)
        self._files[view.name] = path
        return view

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        raise AnonymizationError("Spark has no transactions, which storing a policy or a report's tables needs: do that "
                                 "on DuckDB, and on Spark give the Policy itself")
        yield  # pragma: no cover  (a generator, as the interface's context manager)

    def close(self) -> None:
        """Drop the temporary tables (and their files) and the views of sources; the session stays open."""
        for name in list(self._materialized):
            self._release(name)
        for name in self._files:
            self.session.catalog.dropTempView(name)
        self._files.clear()


def _temporary_table(statement: exp.Expression) -> bool:
    properties = statement.args.get("properties")
    return (isinstance(statement, exp.Create) and statement.kind == "TABLE" and properties is not None
            and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions))


def _new_schema(statement: exp.Expression) -> bool:
    return (isinstance(statement, exp.Create) and statement.kind == "SCHEMA" and bool(statement.args.get("exists"))
            and not statement.args.get("properties"))


def _replaced_table(statement: exp.Expression) -> bool:
    return isinstance(statement, exp.Create) and statement.kind == "TABLE" and bool(statement.args.get("replace"))


class _PreparedTable(Prepared):
    """A temporary table's query, prepared: running it keeps its rows as ``table``."""

    def __new__(cls, text: str, table: str):
        prepared = super().__new__(cls, text)
        prepared.table = table
        return prepared


def _renamed_temporary(statement: exp.Expression, temporary: Mapping[str, object]) -> bool:
    actions = statement.args.get("actions") or []
    return (isinstance(statement, exp.Alter) and isinstance(statement.this, exp.Table)
            and statement.this.name in temporary and len(actions) == 1 and isinstance(actions[0], exp.AlterRename))


def _dropped_temporary(statement: exp.Expression, temporary: Mapping[str, object]) -> bool:
    tables = statement.args.get("tables") or []
    return (isinstance(statement, exp.Drop) and statement.kind == "TABLE" and len(tables) == 1
            and not tables[0].db and tables[0].name in temporary)


def _spark_type(column: pd.Series, types):
    if pd.api.types.is_bool_dtype(column):
        return types.BooleanType()
    if pd.api.types.is_integer_dtype(column):
        return types.LongType()
    if pd.api.types.is_float_dtype(column):
        return types.DoubleType()
    if len(column) and all(isinstance(value, bytes) for value in column):
        return types.BinaryType()
    return types.StringType()
