"""``spark.read.format("deltadv")`` and ``df.write.format("deltadv")``: a PySpark
Python data source over deltadv.

Register it once per session, then read like any other format::

    from deltadv.spark.datasource import register_data_source

    register_data_source(spark)
    df = spark.read.format("deltadv").option("versionAsOf", 3).load("s3://bucket/table")

Planning (log replay, file skipping) runs once, in a Python worker on the driver;
scan tasks are packed into Spark partitions the way Spark packs files (each task
worth its bytes plus 4 MiB, at most ``splitSize`` a partition, spread over the
session's default parallelism seen by :func:`register_data_source`), so a table of
many small files makes a few Spark tasks. The tasks' JSON text is all that crosses
to the executors, which read the data files and apply their deletion vectors
without replaying the log. The version is pinned when Spark first asks for the schema (at
``load()``), so a DataFrame's schema and rows always come from one snapshot.

Options (keys are case-insensitive, as everywhere in Spark):

============================  =========================================================
``path``                      the table URI (what ``load(path)`` sets)
``version`` / ``versionAsOf`` read this table version (time travel)
``timestampAsOf``             read the latest version committed at or before this
                              ISO-8601 timestamp; without an offset it is UTC (Delta
                              Spark uses ``spark.sql.session.timeZone``, which a
                              Python data source cannot see)
``storage.<KEY>``             storage option ``KEY`` (``storage.AWS_ENDPOINT_URL``, ...)
``aws_*``, ``azure_*``,       storage options passed as they are (``AWS_REGION``,
``google_*``                  ``AZURE_STORAGE_ACCOUNT_NAME``, ...); they override those
                              given to ``register_data_source(storage_options=)``
``splitSize``                 files larger than this many bytes are read as several
                              tasks, split by row groups, and no partition packs
                              more (default: the session's
                              ``spark.sql.files.maxPartitionBytes`` when registered,
                              else 128 MiB)
``filterPushdown``            ``true`` to prune with the query's filters (default
                              ``false``; read the caveat below)
``readChangeFeed``            ``true`` to read the Change Data Feed instead of the rows
                              (as Delta Spark): the table's columns then
                              ``_change_type``, ``_commit_version``, ``_commit_timestamp``
``startingVersion`` /         the feed's first commit (default 0), by version or as
``startingTimestamp``         the first commit at or after an ISO-8601 time (UTC
                              without an offset)
``endingVersion`` /           its last commit (default: the latest), by version or as
``endingTimestamp``           the last commit at or before a time
``withRowTracking``           ``true`` to add each row's ``_row_id`` and
                              ``_row_commit_version`` (tables with row tracking; Delta
                              Spark's ``_metadata.row_id`` / ``row_commit_version``),
                              computed on the executors from what each task carries
============================  =========================================================

Any other option is an error, so a misspelt one cannot be silently ignored.

Credentials: give them to ``register_data_source(spark, storage_options={...})``
(``deltadv.spark.register``), not as options. Spark Connect writes each query's
plan, its data source options in clear text, to the event log (classic Spark
redacts the option keys ``spark.redaction.regex`` matches, Connect does not);
storage options bound at registration travel only inside the registered class,
pickled into Spark's Python workers, and reach no plan, ``explain()``, log or
file under ``spark.local.dir`` (tests/python/test_spark_secrets.py).

Filter pushdown (``option("filterPushdown", "true")``): Spark hands the reader the
query's simple filters (``pushFilters``); those deltadv can express (comparisons,
``<=>``, ``IN``, ``IS [NOT] NULL`` and ``NOT`` of them; not the string pattern
filters) become one expression tree, passed to Rust in its JSON form with
every value exact, that planning uses to skip partitions, files and row groups. Every
filter is still reported back as unhandled, so Spark evaluates all of them on the
rows read: pushdown only prunes. PySpark calls ``pushFilters`` only with
``spark.sql.python.filterPushdown.enabled`` on, and refuses such a reader when it
is off; ``register_data_source(spark, filter_pushdown=True)`` turns it on.

The caveat, and why pushdown is off by default: Spark 4.2 caches the planned
partitions on the relation a ``load()`` created and, for a later query on it that
has no filter Spark can push (``df.count()``, ``df.show()``, ``id % 2 = 0``),
reuses the partitions the last pushed query planned, pruned by *that* query's
filters, so rows are silently missing (``df.filter("part = 1").count()`` then
``df.count()`` counts only ``part = 1``). With pushdown on, call ``load()`` once per
query. Without it the cached partitions are all the snapshot's files, always right.

Writing: ``df.write.format("deltadv")`` (PySpark 4's Python data source writer)::

    df.write.format("deltadv").mode("append").save(path)      # creates it if absent
    df.write.format("deltadv").mode("overwrite").save(path)   # all rows replaced
    df.write.format("deltadv").mode("overwrite").option("replaceWhere", "day = '2024-01-01'")
    df.write.format("deltadv").mode("append").option("saveMode", "errorifexists") \
        .option("partitionBy", "day").option("delta.enableChangeDataFeed", "true").save(path)

Each Spark task streams its Arrow batches into :func:`deltadv.write.write_files` (data
files written straight to the table's storage, its partition index the identity
slot, in the session time zone Spark hands the task) and returns their add actions
as its commit message; the driver commits them all once with
:func:`deltadv.write.commit_files`, through deltadv's Rust transaction (one commit
a write: ``WRITE`` with ``mode`` ``Append``/``Overwrite``, ``partitionBy`` and
``predicate`` as Delta Spark's, a write that creates the table too, with the mode
given: ``Append``, ``Overwrite``, or the ``saveMode``). What the writer
does is decided once, in :meth:`DeltaDVDataSource.writer`, against the table as it is:

============================  =========================================================
``mode("append")``            append; the table is created when absent (as Delta)
``mode("overwrite")``         replace every row in one commit (create when absent);
                              with ``replaceWhere`` (SQL text) only the rows it
                              matches, and every new row must satisfy it
``saveMode``                  ``errorifexists``/``error`` (TableAlreadyExistsError
                              when the table exists) or ``ignore`` (write nothing
                              when it exists), with ``mode("append")``: Spark 4.2
                              passes a Python data source only an ``overwrite`` flag
                              and refuses ``mode("error"/"errorifexists"/"ignore")``
                              (the default mode too) itself, before deltadv runs, with
                              ``[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] The data source
                              "deltadv" cannot be written in the "ErrorIfExists"
                              mode``
``partitionBy``               partition columns of a table created (comma-separated
                              or a JSON list); on an existing table they must be its
                              own. ``DataFrameWriter.partitionBy`` does not reach a
                              Python data source: Spark refuses it (``requirement
                              failed: The provided partitioning or clustering columns
                              do not match the existing table's``)
``delta.<property>``          a table property (``delta.enableChangeDataFeed``,
                              ``delta.columnMapping.mode``, ``delta.feature.<name>``,
                              ...) of a table the write creates (Spark lower-cases
                              option keys; Delta's spelling is restored, an unknown
                              property is an error). Deletion vectors are on unless
                              ``delta.enableDeletionVectors`` is ``false``. On an
                              existing table they are not applied
``mergeSchema``               ``true``: columns of the data the table lacks are added
                              (nullable), as Delta Spark's ``mergeSchema``
``overwriteSchema``           ``true`` with ``mode("overwrite")``: the table's schema and
                              partitioning (``partitionBy``, none when not given) are
                              replaced by the data's, as Delta Spark 4.4's (ignored by
                              an append, as there)
``storage.<KEY>``, ``AWS_*``  storage options, as for reads
============================  =========================================================

A column-mapped table (``delta.columnMapping.mode`` ``name``/``id``) is created with
the physical names and field ids :func:`deltadv.write.prepare_create` decides once,
in ``writer()``, for every task and the commit. A task that fails removes the files
it wrote; Spark then calls ``abort()``, which removes the files of the tasks that
finished, so a failed write leaves no commit. A task attempt Spark kills mid-write
(another task failed, a losing speculative attempt) is not reported to ``abort()``:
its writer removes its files when its input breaks off, but a Python worker killed
outright leaves them behind, unreferenced by any commit, until VACUUM. Identity
values: each task hands them out in its own slot (``index << 33``, unique, not Delta
Spark's interleaving: the writer does not know the stage's task count). Not supported:
``saveAsTable`` (no catalog). ``txnAppId`` with ``txnVersion`` (Delta Spark's idempotent
writes): the commit carries Delta's ``txn`` action, and a write whose version the table
holds for that application already writes and commits nothing.

Streaming sink: ``df.writeStream.format("deltadv")`` (PySpark's Python stream writer)::

    df.writeStream.format("deltadv").option("checkpointLocation", cp) \
        .outputMode("append").trigger(availableNow=True).start(path)

Each micro-batch's tasks write data files as df.write's do (for the table as it is
when they run: the first batch creates it when absent); :meth:`DeltaDVStreamWriter.commit`
commits them as ONE commit through deltadv's Rust transaction, ``STREAMING UPDATE``
with ``outputMode``, ``queryId`` and ``epochId`` as Delta Spark's sink records it,
carrying Delta's ``txn`` action: appId = the query's id, version = the batch id. The
query id is what Delta Spark's sink uses: the id Spark keeps in the checkpoint (stable
across restarts from it), which Spark hands every task as the local property
``sql.streaming.queryId``; the tasks pass it to the commit in their messages (with no
task, the commit reads it from the checkpoint's ``metadata`` file, on a local
checkpoint). A batch Spark replays after a crash (committed to the table but not to
the checkpoint's commit log) finds its version in the table: the transaction commits
nothing and the batch's files are removed. The batch commits on the table as it is
at its commit (another writer's commit since its tasks ran is no conflict for an
append); a first batch whose tasks wrote files for a new table that another writer
created meanwhile fails with ``CommitConflictError`` (its files removed), and runs
again, as an append, when the query restarts. Output modes: ``append``, and ``complete``
(the table's rows replaced in the one commit); Spark itself refuses ``update`` for a
Python sink (``deltadv does not support Update mode``), as Delta Spark's. Options: ``partitionBy``,
``mergeSchema``, ``overwriteSchema`` (complete), ``delta.*`` (a table the first batch
creates; not column mapping, whose physical names the tasks and the commit would
decide apart: create such a table first) and storage options, as df.write's;
``replaceWhere``, ``saveMode``, ``txnAppId`` and ``txnVersion`` are refused.
``toTable`` is not supported (no catalog).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa

try:  # PySpark 4.1's Python data source API with filters; absent in 3.5 and 4.0
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        EqualNullSafe,
        EqualTo,
        Filter,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        InputPartition,
        IsNotNull,
        IsNull,
        LessThan,
        LessThanOrEqual,
        Not,
        WriterCommitMessage,
    )
except ImportError as missing:
    import pyspark as _pyspark

    from deltadv.exceptions import UnsupportedSparkError

    raise UnsupportedSparkError(
        f'deltadv: format("deltadv") (register, spark.read.format and df.write.format) '
        f"needs PySpark's Python data source API with filters (PySpark 4.1 or later); "
        f"PySpark {_pyspark.__version__} lacks it ({missing}). On this PySpark read with "
        "deltadv.spark.read(spark, path), write with deltadv.spark.write_table(df, path), "
        "and run DELETE/UPDATE/MERGE through deltadv.spark.DeltaTable.forPath(spark, path)"
    ) from missing
from pyspark.sql.types import StructType

try:  # the Arrow writer base class (PySpark 4.2 has it); without it, no df.write
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # pragma: no cover - older PySpark
    from pyspark.sql.datasource import DataSourceWriter as DataSourceArrowWriter

    _ARROW_WRITER = False
else:
    _ARROW_WRITER = True

try:  # the Arrow stream writer (PySpark 4.1+); without it, no df.writeStream
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - older PySpark
    from pyspark.sql.datasource import DataSourceStreamWriter as DataSourceStreamArrowWriter

    _ARROW_STREAM_WRITER = False
else:
    _ARROW_STREAM_WRITER = True

from deltadv import DeltaTable, ScanTask
from deltadv.expressions import Expression, UnsupportedValue, column, conjunction, literal
from deltadv.spark._tasks import (
    DEFAULT_SPLIT_SIZE,
    default_parallelism,
    pack,
    session_time_zone,
    task_threads,
    to_arrow_schema,
)
from deltadv.spark._tasks import split_size as _session_split_size
from deltadv.spark.workers import require_workers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FORMAT_NAME",
    "DeltaDVChangeFeedReader",
    "DeltaDVCommitMessage",
    "DeltaDVDataSource",
    "DeltaDVPlainReader",
    "DeltaDVReader",
    "DeltaDVStreamCommitMessage",
    "DeltaDVStreamWriter",
    "DeltaDVWriter",
    "filters_to_predicate",
    "register_data_source",
    "to_predicate",
]

FORMAT_NAME = "deltadv"
#: The columns a Change Data Feed read adds after the table's.
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
#: The columns ``withRowTracking`` adds after the table's.
ROW_TRACKING_COLUMNS = ("_row_id", "_row_commit_version")
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

STORAGE_PREFIX = "storage."
STORAGE_KEY_PREFIXES = ("aws_", "azure_", "google_")
VERSION_KEYS = ("version", "versionasof")
TIMESTAMP_KEY = "timestampasof"
PUSHDOWN_KEY = "filterpushdown"
SPLIT_SIZE_KEY = "splitsize"
CDF_KEY = "readchangefeed"
ROW_TRACKING_KEY = "withrowtracking"
CDF_RANGE_KEYS = ("startingversion", "endingversion", "startingtimestamp", "endingtimestamp")
# Spark adds `path` for load(path); `paths` only for load([...]), which we refuse.
KNOWN_KEYS = frozenset(
    {
        "path",
        "paths",
        TIMESTAMP_KEY,
        PUSHDOWN_KEY,
        SPLIT_SIZE_KEY,
        CDF_KEY,
        ROW_TRACKING_KEY,
        *CDF_RANGE_KEYS,
        *VERSION_KEYS,
    }
)


# --------------------------------------------------------------------------------------
# Spark filters -> deltadv expression tree (JSON form)
# --------------------------------------------------------------------------------------


_Comparison = (
    EqualTo | EqualNullSafe | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual
)
_OPERATORS: dict[type[Filter], str] = {
    EqualTo: "=",
    EqualNullSafe: "<=>",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


#: A filter or value the expression tree cannot hold (it is not pushed).
_Unsupported = UnsupportedValue
_column = column
_literal = literal


def _convert(f: Filter) -> Expression:
    # PySpark 4.2 pushes no And/Or filters to Python data sources (a top-level
    # AND arrives as separate filters; an OR is not pushed).
    if isinstance(f, Not):
        return {"not": _convert(f.child)}
    if isinstance(f, IsNull):
        return {"is_null": _column(f.attribute)}
    if isinstance(f, IsNotNull):
        return {"not": {"is_null": _column(f.attribute)}}
    if isinstance(f, In):
        return {"in": {"value": _column(f.attribute), "list": [_literal(v) for v in f.value]}}
    if isinstance(f, _Comparison):
        return {
            "cmp": {
                "op": _OPERATORS[type(f)],
                "left": _column(f.attribute),
                "right": _literal(f.value),
            }
        }
    # string patterns (StringStartsWith/EndsWith/Contains) and anything newer
    raise _Unsupported(f"{type(f).__name__} filters are not pushed")


def to_predicate(f: Filter) -> Expression | None:
    """One Spark data source filter as a deltadv expression tree (its JSON form, a
    dict), or None if it has none. Values keep their exact type and value: nothing
    is rendered as SQL text.

    >>> to_predicate(EqualTo(("st", "a b"), 1.5))
    {'cmp': {'op': '=', 'left': {'column': ['st', 'a b']}, 'right': {'literal': {'double': '1.5'}}}}
    """
    try:
        return _convert(f)
    except _Unsupported:
        return None


def filters_to_predicate(filters: Iterable[Filter]) -> Expression | None:
    """The AND of the filters deltadv can express (Spark's filter list is a
    conjunction, so dropping a member only widens it); None if there are none."""
    return conjunction([p for p in map(to_predicate, filters) if p is not None])


# --------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------


def _table_uri(options: Mapping[str, str]) -> str:
    if "paths" in options and options["paths"] not in ("", "[]"):
        raise ValueError("deltadv reads one table: call load(path) with a single path")
    uri = options.get("path")
    if not uri:
        raise ValueError('deltadv needs a table path: spark.read.format("deltadv").load(path)')
    if not urlparse(uri).scheme or (len(uri) > 1 and uri[1] == ":"):  # local, maybe C:\
        return os.path.abspath(uri)  # tasks must not depend on the executor's cwd
    return uri


def _storage_key(key: str) -> str | None:
    """The storage option an option ``key`` (lower case) names: ``storage.<KEY>``
    or an ``AWS_*``/``AZURE_*``/``GOOGLE_*`` key, upper-cased; None for others."""
    if key.startswith(STORAGE_PREFIX) and len(key) > len(STORAGE_PREFIX):
        return key[len(STORAGE_PREFIX) :].upper()
    if key.startswith(STORAGE_KEY_PREFIXES):
        return key.upper()
    return None


def _storage_options(options: Mapping[str, str]) -> dict[str, str]:
    storage: dict[str, str] = {}
    unknown = []
    for key, value in options.items():
        k = key.lower()
        if (name := _storage_key(k)) is not None:
            storage[name] = value
        elif k not in KNOWN_KEYS:
            unknown.append(key)
    if unknown:
        raise ValueError(
            f"deltadv: unknown option(s) {sorted(unknown)}; expected path, version, versionAsOf, "
            "timestampAsOf, splitSize, filterPushdown, readChangeFeed, withRowTracking, "
            "startingVersion, "
            "endingVersion, startingTimestamp, endingTimestamp, storage.<KEY> or "
            "AWS_*/AZURE_*/GOOGLE_* keys"
        )
    return storage


def _version_option(options: Mapping[str, str]) -> int | None:
    given = {k: options[k] for k in VERSION_KEYS if k in options}
    if len(set(given.values())) > 1:
        raise ValueError(f"deltadv: conflicting version options {given}")
    if not given:
        return None
    text = next(iter(given.values())).strip()
    try:
        version = int(text)
    except ValueError:
        raise ValueError(f"deltadv: version must be an integer, not {text!r}") from None
    if version < 0:
        raise ValueError(f"deltadv: version must be >= 0, not {version}")
    return version


def _open_table(options: Mapping[str, str]) -> DeltaTable:
    """The table at the version the options ask for (latest if none)."""
    uri = _table_uri(options)
    storage = _storage_options(options)
    version = _version_option(options)
    timestamp = options.get(TIMESTAMP_KEY)
    if version is not None and timestamp:
        raise ValueError("deltadv: give versionAsOf or timestampAsOf, not both")
    table = DeltaTable(uri, version=version, storage_options=storage or None)
    if timestamp:
        table.load_as_version(timestamp.strip())
    return table


def _split_size(options: Mapping[str, str], default: int = DEFAULT_SPLIT_SIZE) -> int:
    text = options.get(SPLIT_SIZE_KEY, str(default)).strip()
    try:
        size = int(text)
    except ValueError:
        raise ValueError(f"deltadv: splitSize must be a number of bytes, not {text!r}") from None
    if size <= 0:
        raise ValueError(f"deltadv: splitSize must be > 0, not {size}")
    return size


def _change_feed(options: Mapping[str, str]) -> dict[str, Any] | None:
    """The Change Data Feed range the options ask for (``load_cdf``'s arguments), or
    None when they ask for the table's rows."""
    value = options.get(CDF_KEY, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"deltadv: readChangeFeed must be true or false, not {value!r}")
    given = [k for k in CDF_RANGE_KEYS if k in options]
    if value == "false":
        if given:
            raise ValueError(f"deltadv: {given} need option readChangeFeed=true")
        return None
    if any(k in options for k in (*VERSION_KEYS, TIMESTAMP_KEY)):
        raise ValueError(
            "deltadv: readChangeFeed takes startingVersion/endingVersion (or timestamps), "
            "not versionAsOf/timestampAsOf"
        )
    feed: dict[str, Any] = {}
    for key, name in (("startingversion", "starting_version"), ("endingversion", "ending_version")):
        if key in options:
            text = options[key].strip()
            try:
                feed[name] = int(text)
            except ValueError:
                raise ValueError(f"deltadv: {key} must be an integer, not {text!r}") from None
    for key, name in (
        ("startingtimestamp", "starting_timestamp"),
        ("endingtimestamp", "ending_timestamp"),
    ):
        if key in options:
            feed[name] = options[key].strip()
    return feed


def _stream_feed_schema(options: Mapping[str, str]) -> bool:
    """Whether the options ask for the change feed from the start (no range given) or
    from ``startingVersion=latest`` (a stream's), whose schema is the latest
    version's with the change columns."""
    if options.get(CDF_KEY, "false").strip().lower() != "true":
        return False
    given = {k: options[k].strip().lower() for k in CDF_RANGE_KEYS if k in options}
    return not given or given == {"startingversion": "latest"}


def _row_tracking(options: Mapping[str, str]) -> bool:
    """Whether the options ask for ``_row_id`` and ``_row_commit_version``."""
    value = options.get(ROW_TRACKING_KEY, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"deltadv: withRowTracking must be true or false, not {value!r}")
    if value == "true" and options.get(CDF_KEY, "false").strip().lower() == "true":
        raise ValueError("deltadv: withRowTracking reads the table's rows, not readChangeFeed")
    return value == "true"


def _pushdown_enabled(options: Mapping[str, str]) -> bool:
    value = options.get(PUSHDOWN_KEY, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"deltadv: filterPushdown must be true or false, not {value!r}")
    return value == "true"


# --------------------------------------------------------------------------------------
# The data source
# --------------------------------------------------------------------------------------


class DeltaDVDataSource(DataSource):
    """``spark.read.format("deltadv")``: Delta tables with deletion vectors applied."""

    # The version schema() loaded; pickled with the instance, so planning reads it.
    _version: int | None = None
    # The session's default parallelism and maxPartitionBytes, set on the subclass
    # register_data_source() registers (planning runs in a Python worker, which
    # cannot ask the session). None: unknown (tasks then pack only up to their
    # mean size).
    _parallelism: int | None = None
    _max_partition_bytes: int = DEFAULT_SPLIT_SIZE
    # The registering session's spark.sql.session.timeZone: what a write commits
    # in when no task reported the zone it ran in (tasks read it from Spark).
    _time_zone: str | None = None
    # Storage options given to register_data_source(storage_options=...): bound to
    # the registered subclass (pickled by value into Spark's Python workers), never
    # in the query's options, so Spark cannot log them with its plans.
    _storage: Mapping[str, str] = {}

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _options(self) -> dict[str, str]:
        """The query's options, with the registered storage options (``storage.<KEY>``)
        under those the query gives itself."""
        given = {_storage_key(k.lower()) for k in self.options}
        bound = {
            f"{STORAGE_PREFIX}{k.lower()}": v
            for k, v in self._storage.items()
            if k.upper() not in given
        }
        return {**bound, **self.options}

    def _pinned(self, options: Mapping[str, str] | None = None) -> DeltaTable:
        table = _open_table(self._options() if options is None else options)
        self._version = table.version()
        return table

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        from deltadv.spark.stream_source import batch_options

        # readStream's own options are checked by streamReader()
        options = batch_options(self._options())
        if _stream_feed_schema(options):
            # the latest version's columns, as a range up to it has: no range to plan
            schema = self._pinned(options).change_feed_schema()
            return from_arrow_schema(schema, prefer_timestamp_ntz=True)
        feed = _change_feed(options)
        if feed is not None:
            schema, _ = self._pinned(options).cdf_tasks(**feed)
            return from_arrow_schema(schema, prefer_timestamp_ntz=True)
        table = self._pinned(options)
        tracked = _row_tracking(options)
        schema = table.scan_schema(with_row_tracking=True) if tracked else table.schema()
        return from_arrow_schema(schema, prefer_timestamp_ntz=True)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = self._options()
        _storage_options(opts)  # reject bad options before planning
        _split_size(opts)
        _row_tracking(opts)
        packing = (self._parallelism, self._max_partition_bytes)
        if _change_feed(opts) is not None:
            options = dict(opts)
            if self._version is not None and not any(
                k in options for k in ("endingversion", "endingtimestamp")
            ):
                # The range ends where schema() saw the table: rows and schema agree.
                options["endingversion"] = str(self._version)
            return DeltaDVChangeFeedReader(options, schema, packing)
        pushdown = _pushdown_enabled(opts)
        version = self._version
        if version is None:  # a user-given schema: Spark did not ask us for one
            version = self._pinned().version()
        options = dict(opts)  # plain dict: the reader is pickled to executors
        for key in (*VERSION_KEYS, TIMESTAMP_KEY):
            options.pop(key, None)
        options["version"] = str(version)
        cls = DeltaDVReader if pushdown else DeltaDVPlainReader
        return cls(options, schema, packing)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("deltadv")``: see
        :mod:`deltadv.spark.stream_source`."""
        from deltadv.spark.stream_source import DeltaDVStreamReader, batch_options

        options = dict(self._options())  # plain dict: the reader is pickled to executors
        rows = batch_options(options)
        packing = (self._parallelism, self._max_partition_bytes)
        return DeltaDVStreamReader(
            options,
            schema,
            DeltaDVPlainReader(rows, schema, packing),
            table_uri=_table_uri(options),
            storage_options=_storage_options(rows),  # rejects unknown options
            split_size=_split_size(options, self._max_partition_bytes),
            parallelism=self._parallelism,
            version=self._version,
        )

    def writer(self, schema: StructType, overwrite: bool) -> DeltaDVWriter:
        """``df.write.format("deltadv")``: see the module docs' "Writing"."""
        return _writer(self._options(), schema, overwrite, self._time_zone)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeltaDVStreamWriter:
        """``df.writeStream.format("deltadv")``: see the module docs' "Streaming sink"."""
        return _stream_writer(self._options(), schema, overwrite, self._time_zone)


def _packed(tasks: Sequence[ScanTask], split_size: int, parallelism: int | None) -> list[Any]:
    """Scan tasks as Spark partitions, each the JSON texts of the tasks it reads
    (packed like Spark's files: ``_spark_util._pack``)."""
    sizes = [task.size for task in tasks]
    groups = pack(sizes, split_size, parallelism or max(1, len(tasks)))
    return [InputPartition([tasks[i].json for i in group]) for group in groups]


class DeltaDVPlainReader(DataSourceReader):
    """Scan tasks packed into Spark partitions, planned without Spark's filters."""

    def __init__(
        self,
        options: dict[str, str],
        schema: StructType,
        packing: tuple[int | None, int] = (None, DEFAULT_SPLIT_SIZE),
    ) -> None:
        self.options = options
        self.schema = schema
        self.predicate: Expression | None = None
        # (default parallelism or None, maxPartitionBytes) of the registering session
        self.parallelism, self.max_partition_bytes = packing

    def _split(self) -> int:
        return _split_size(self.options, self.max_partition_bytes)

    def partitions(self) -> list[InputPartition]:
        table = _open_table(self.options)
        tracked = _row_tracking(self.options)
        names = self.schema.fieldNames()
        if tracked:  # added by the tasks, after the table's columns
            names = [n for n in names if n not in ROW_TRACKING_COLUMNS]
        table_names = table.schema().names
        missing = [n for n in names if n not in table_names]
        if missing:
            raise ValueError(
                f"deltadv: no column(s) {missing} in {table.table_uri} (columns: {table_names})"
            )
        columns = None if names == table_names else names
        # filter_rows=False: the predicate only prunes (files, row groups); Spark applies
        # every filter to the rows, and a filter that does not bind just prunes nothing.
        split = self._split()
        tasks = table.scan_tasks(
            columns,
            self.predicate,
            filter_rows=False,
            split_size=split,
            with_row_tracking=tracked,
        )
        return _packed(tasks, split, self.parallelism)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in partition for an empty table
            return
        # Spark requires this exact Arrow schema (names, order, types, nullability).
        target = to_arrow_schema(self.schema)
        storage = _storage_options(self.options)
        task_threads()
        for text in partition.value:
            for batch in ScanTask(text, storage).read(ordered=False):
                if batch.schema != target:
                    batch = pa.RecordBatch.from_arrays(
                        [batch.column(f.name).cast(f.type) for f in target], schema=target
                    )
                yield batch


class DeltaDVReader(DeltaDVPlainReader):
    """:class:`DeltaDVPlainReader` with filter pushdown: the query's filters prune
    partitions, files and row groups at planning; Spark still applies them all."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.predicate = filters_to_predicate(filters)
        return filters  # all unhandled: we only prune, Spark filters the rows


class DeltaDVChangeFeedReader(DeltaDVPlainReader):
    """``readChangeFeed``: the range's change tasks, packed into Spark partitions."""

    def partitions(self) -> list[InputPartition]:
        feed = _change_feed(self.options) or {}
        table = DeltaTable(
            _table_uri(self.options), storage_options=_storage_options(self.options) or None
        )
        names = self.schema.fieldNames()
        table_names = table.schema().names
        wanted = [n for n in names if n not in CHANGE_COLUMNS]
        columns = None if wanted == table_names else wanted
        _, tasks = table.cdf_tasks(**feed, columns=columns)
        return _packed(tasks, self._split(), self.parallelism)


def register_data_source(
    spark: SparkSession,
    *,
    filter_pushdown: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Register ``format("deltadv")`` in the session; with ``filter_pushdown``, also
    set ``spark.sql.python.filterPushdown.enabled``, which reads with
    ``option("filterPushdown", "true")`` need (see the module docs for the caveat).

    The session's default parallelism and ``spark.sql.files.maxPartitionBytes`` are
    read here and kept on the registered class: reads pack their scan tasks into
    partitions with them, as Spark packs files.

    ``storage_options`` (credentials, endpoint, ...) are kept on the registered
    class too, for every ``format("deltadv")`` read and write of the session
    (a query's own storage options win over them): unlike reader and writer
    options, they never appear in Spark's plans, ``explain()`` or event log,
    where Spark Connect writes a query's options in clear text."""
    require_workers(spark)
    parallelism: int | None = default_parallelism(spark)
    storage = {str(k).upper(): str(v) for k, v in (storage_options or {}).items()}
    attrs = {
        "_storage": storage,
        "_parallelism": parallelism,
        "_max_partition_bytes": _session_split_size(spark),
        "_time_zone": session_time_zone(spark),
        "__module__": __name__,
        "__doc__": DeltaDVDataSource.__doc__,
    }
    spark.dataSource.register(type("DeltaDVDataSource", (DeltaDVDataSource,), attrs))
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")


# --------------------------------------------------------------------------------------
# df.write.format("deltadv"): the writer
# --------------------------------------------------------------------------------------

TIME_ZONE_CONF = "spark.sql.session.timeZone"
PARTITION_BY_KEY = "partitionby"
REPLACE_WHERE_KEY = "replacewhere"
SAVE_MODE_KEY = "savemode"
MERGE_SCHEMA_KEY = "mergeschema"
OVERWRITE_SCHEMA_KEY = "overwriteschema"
TXN_APP_ID_KEY = "txnappid"
TXN_VERSION_KEY = "txnversion"
CHECKPOINT_KEY = "checkpointlocation"
TABLE_PROPERTY_PREFIX = "delta."
WRITE_KEYS = frozenset(
    {
        "path",
        PARTITION_BY_KEY,
        REPLACE_WHERE_KEY,
        SAVE_MODE_KEY,
        MERGE_SCHEMA_KEY,
        OVERWRITE_SCHEMA_KEY,
        TXN_APP_ID_KEY,
        TXN_VERSION_KEY,
        CHECKPOINT_KEY,
    }
)
SAVE_MODES = ("error", "errorifexists", "ignore", "append")


def _table_property(key: str) -> str:
    """The canonical name of the table property option ``key`` (Spark hands a
    Python data source its options in lower case; the Rust core knows Delta's
    spelling); ValueError for one Delta does not know (as Delta Spark refuses it)."""
    from deltadv.write import table_property_name

    name = table_property_name(key)
    if name is None:
        raise ValueError(
            f"deltadv: unknown table property option {key!r}: not one of Delta's table "
            "properties (delta.appendOnly, delta.enableDeletionVectors, ...) nor "
            "delta.feature.<a known feature>"
        )
    return name


def _partition_by(text: str) -> list[str]:
    """``partitionBy``: column names, comma-separated or a JSON list."""
    text = text.strip()
    if text.startswith("["):
        import json

        names = json.loads(text)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"deltadv: partitionBy must be a JSON list of names, not {text!r}")
        return names
    return [n.strip() for n in text.split(",") if n.strip()]


def _txn_options(options: Mapping[str, str]) -> tuple[str, int] | None:
    """``txnAppId`` / ``txnVersion`` (together, as Delta Spark requires):
    the write's application transaction, or None."""
    app_id = options.get(TXN_APP_ID_KEY)
    version = options.get(TXN_VERSION_KEY)
    if app_id is None and version is None:
        return None
    if app_id is None or version is None:
        raise ValueError(
            "deltadv: options txnAppId and txnVersion go together (Delta Spark's idempotent "
            f"writes); given txnAppId={app_id!r}, txnVersion={version!r}"
        )
    try:
        number = int(version.strip())
    except ValueError:
        raise ValueError(f"deltadv: txnVersion must be an integer, not {version!r}") from None
    return app_id, number


def _applied(table: DeltaTable, txn: tuple[str, int] | None) -> bool:
    """Whether ``table`` holds the application transaction ``txn`` already
    (an early skip: deltadv's Rust transaction skips such a commit itself)."""
    return txn is not None and table.transaction_applied(*txn)


def _flag(options: Mapping[str, str], key: str, name: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"deltadv: {name} must be true or false, not {value!r}")
    return value == "true"


def _schema_mode(options: Mapping[str, str], overwrite: bool) -> str | None:
    """``overwriteSchema`` (with ``mode("overwrite")``: ``"overwrite"``; ignored
    by an append, as Delta Spark ignores it) else ``mergeSchema`` (``"merge"``):
    the ``schema_mode`` of :func:`deltadv.write.write_table`."""
    merge = _flag(options, MERGE_SCHEMA_KEY, "mergeSchema")
    if overwrite and _flag(options, OVERWRITE_SCHEMA_KEY, "overwriteSchema"):
        return "overwrite"
    return "merge" if merge else None


def _write_options(
    options: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str], list[str], str | None, str | None]:
    """The writer's options: storage options, table properties (``delta.*``),
    partition columns, the replaceWhere predicate and the saveMode option."""
    storage: dict[str, str] = {}
    configuration: dict[str, str] = {}
    unknown = []
    for key, value in options.items():
        k = key.lower()
        if (name := _storage_key(k)) is not None:
            storage[name] = value
        elif k.startswith(TABLE_PROPERTY_PREFIX):
            configuration[_table_property(k)] = value
        elif k not in WRITE_KEYS:
            unknown.append(key)
    if unknown:
        raise ValueError(
            f"deltadv: unknown write option(s) {sorted(unknown)}; expected path, partitionBy, "
            "replaceWhere, saveMode, mergeSchema, overwriteSchema, txnAppId, txnVersion, "
            "checkpointLocation (streaming), delta.<table property>, "
            "storage.<KEY> or "
            "AWS_*/AZURE_*/GOOGLE_* keys"
        )
    parts = _partition_by(options.get(PARTITION_BY_KEY, ""))
    predicate = options.get(REPLACE_WHERE_KEY) or None
    save_mode = options.get(SAVE_MODE_KEY)
    if save_mode is not None:
        save_mode = save_mode.strip().lower()
        if save_mode == "default":
            save_mode = "errorifexists"
        if save_mode not in SAVE_MODES:
            raise ValueError(
                f"deltadv: saveMode must be one of {list(SAVE_MODES)}, not {save_mode!r}"
            )
    return storage, configuration, parts, predicate, save_mode


@dataclass
class DeltaDVCommitMessage(WriterCommitMessage):
    """What one write task hands the commit: its files' add actions and the
    session time zone the task wrote in."""

    adds: list[dict[str, Any]]
    time_zone: str | None


class DeltaDVWriter(DataSourceArrowWriter):
    """Writes each Spark task's rows as data files (:func:`deltadv.write.write_files`,
    on the executors) and commits them all once (:func:`deltadv.write.commit_files`,
    on the driver); :meth:`abort` removes the files of a write given up."""

    def __init__(
        self,
        table_uri: str,
        mode: str,
        *,
        skip: bool,
        schema: pa.Schema,
        table_schema: str | None,
        partition_by: list[str],
        storage_options: dict[str, str],
        configuration: dict[str, str],
        predicate: str | None,
        time_zone: str | None,
        schema_mode: str | None = None,
        operation_mode: str | None = None,
        txn: tuple[str, int] | None = None,
    ) -> None:
        self.table_uri = table_uri
        self.txn = txn  # txnAppId / txnVersion
        self.schema_mode = schema_mode  # mergeSchema / overwriteSchema
        # The save mode a create records (WRITE, as Delta Spark's df.write).
        self.operation_mode = operation_mode
        self.mode = mode  # "error" (create), "append" or "overwrite"
        self.skip = skip  # saveMode ignore on an existing table: nothing written
        self.schema = schema
        self.table_schema = table_schema
        self.partition_by = partition_by
        self.storage_options = storage_options
        self.configuration = configuration
        self.predicate = predicate
        self.time_zone = time_zone

    def _enable_dvs(self) -> bool:
        value = self.configuration.get("delta.enableDeletionVectors", "true")
        return value.strip().lower() == "true"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaDVCommitMessage:
        import itertools

        from pyspark import TaskContext

        from deltadv.spark._tasks import task_slot
        from deltadv.write import write_files

        context = TaskContext.get()
        zone = (context.getLocalProperty(TIME_ZONE_CONF) if context else None) or self.time_zone
        if self.skip:
            return DeltaDVCommitMessage([], zone)
        first = next(iterator, None)
        if first is None:
            return DeltaDVCommitMessage([], zone)
        data = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], iterator))
        adds = write_files(
            self.table_uri,
            data,
            mode=self.mode,  # type: ignore[arg-type]
            schema=None if self.table_schema else self.schema,
            table_schema=self.table_schema,
            partition_by=self.partition_by,
            storage_options=self.storage_options,
            configuration=self.configuration,
            enable_deletion_vectors=self._enable_dvs(),
            identity_slot=task_slot(),
            time_zone=zone or "UTC",
            predicate=self.predicate,
            schema_mode=self.schema_mode,  # type: ignore[arg-type]
        )
        return DeltaDVCommitMessage(adds, zone)

    @staticmethod
    def _adds(messages: Sequence[WriterCommitMessage | None]) -> list[dict[str, Any]]:
        return [a for m in messages if isinstance(m, DeltaDVCommitMessage) for a in m.adds]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip:
            return
        app_id, version = self.txn or (None, None)
        self.commit_as(messages, self.mode, txn_app_id=app_id, txn_version=version)

    def commit_as(
        self, messages: Sequence[WriterCommitMessage | None], mode: str, **txn: Any
    ) -> None:
        """Commit the tasks' files in ``mode``; ``txn``: the application
        transaction keywords of :func:`deltadv.write.commit_files`."""
        from deltadv.write import commit_files

        zones = {m.time_zone for m in messages if isinstance(m, DeltaDVCommitMessage)}
        zones.discard(None)
        zone = zones.pop() if len(zones) == 1 else self.time_zone
        commit_files(
            self.table_uri,
            self._adds(messages),
            mode=mode,  # type: ignore[arg-type]
            schema=None if self.table_schema else self.schema,
            table_schema=self.table_schema,
            partition_by=self.partition_by,
            storage_options=self.storage_options,
            configuration=self.configuration,
            enable_deletion_vectors=self._enable_dvs(),
            predicate=self.predicate,
            time_zone=zone or "UTC",
            schema_mode=self.schema_mode,  # type: ignore[arg-type]
            operation="WRITE",
            operation_mode=self.operation_mode,  # type: ignore[arg-type]
            **txn,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from deltadv.write import remove_files

        adds = self._adds(messages)
        if adds:
            remove_files(self.table_uri, adds, storage_options=self.storage_options)


def _as_nullable(field: pa.Field) -> pa.Field:
    """``field`` and everything nested in it nullable (Spark's ``asNullable``)."""
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_as_nullable(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_large_list(t):
        t = pa.large_list(_as_nullable(t.value_field))
    elif pa.types.is_list(t):
        t = pa.list_(_as_nullable(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(t.key_field, _as_nullable(t.item_field))
    return field.with_type(t).with_nullable(True)


def _writer(
    options: Mapping[str, str], schema: StructType, overwrite: bool, time_zone: str | None
) -> DeltaDVWriter:
    """The writer for ``df.write.format("deltadv")``, its mode decided here, on the
    driver, against the table as it is now."""
    from deltadv.exceptions import TableAlreadyExistsError, TableNotFoundError
    from deltadv.write import prepare_create

    if not _ARROW_WRITER:
        import pyspark

        raise NotImplementedError(
            f'deltadv: df.write.format("deltadv") needs pyspark.sql.datasource.'
            f"DataSourceArrowWriter, which PySpark {pyspark.__version__} lacks"
        )
    uri = _table_uri(options)
    storage, configuration, parts, predicate, save_mode = _write_options(options)
    if predicate is not None and not overwrite:
        raise ValueError('deltadv: option replaceWhere needs mode("overwrite")')
    schema_mode = _schema_mode(options, overwrite)
    txn = _txn_options(options)
    if save_mode is not None and overwrite:
        raise ValueError(
            f'deltadv: option saveMode={save_mode!r} goes with mode("append") '
            '(Spark passes a Python data source only "append" or "overwrite")'
        )
    try:
        existing: DeltaTable | None = DeltaTable(uri, storage_options=storage or None)
    except TableNotFoundError:
        existing = None
    skip = False
    if existing is not None:
        if save_mode in ("error", "errorifexists"):
            raise TableAlreadyExistsError(
                f"a Delta table already exists at {existing.table_uri} "
                f"(version {existing.version()})"
            )
        # An idempotent write the table holds already (txnAppId/txnVersion): no
        # task writes; the Rust transaction would skip its commit anyway.
        skip = save_mode == "ignore" or _applied(existing, txn)
        mode = "overwrite" if overwrite else "append"
        table_parts = list(existing.metadata().get("partitionColumns") or [])
        if parts and parts != table_parts and not skip and schema_mode != "overwrite":
            raise ValueError(
                f"deltadv: partitionBy {parts} differs from the table's partition columns "
                f"{table_parts} at {existing.table_uri}"
            )
        configuration = {}  # table properties are set when the table is created
    else:
        mode = "overwrite" if overwrite else "error"  # Delta's append creates the table too
    # Every column nullable, as Delta Spark's df.write makes a table's schema from
    # a DataFrame's (NOT NULL comes only from DDL); the data may still be non-null.
    arrow_schema = to_arrow_schema(schema)
    arrow_schema = pa.schema(
        [_as_nullable(f) for f in arrow_schema], metadata=arrow_schema.metadata
    )
    table_schema = None
    mapping = configuration.get("delta.columnMapping.mode", "none").strip().lower()
    if existing is None and mapping != "none":
        # Physical names and field ids decided once, for every task and the commit.
        table_schema = prepare_create(arrow_schema, configuration=configuration)
    return DeltaDVWriter(
        uri,
        mode,
        skip=skip,
        schema=arrow_schema,
        table_schema=table_schema,
        partition_by=parts,
        storage_options=storage,
        configuration=configuration,
        predicate=predicate,
        time_zone=time_zone,
        schema_mode=schema_mode,
        operation_mode="overwrite" if overwrite else (save_mode or "append"),
        txn=txn,
    )


# --------------------------------------------------------------------------------------
# df.writeStream.format("deltadv"): the streaming sink
# --------------------------------------------------------------------------------------

#: The task-local property Spark sets to the streaming query's id (Spark's
#: ``StreamExecution.QUERY_ID_KEY``, which Delta Spark's sink reads too).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
#: Options of df.write that a stream cannot take.
BATCH_ONLY_KEYS = (REPLACE_WHERE_KEY, SAVE_MODE_KEY, TXN_APP_ID_KEY, TXN_VERSION_KEY)


@dataclass
class DeltaDVStreamCommitMessage(DeltaDVCommitMessage):
    """A micro-batch task's files, with the query id Spark gave the task and
    the mode the files were written for (``error``: a table to be created)."""

    query_id: str | None = None
    mode: str = "append"


def _checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The query id in the checkpoint's ``metadata`` file (``{"id": ...}``, what
    Spark writes when the query first starts), when it is a local path."""
    import json

    if not checkpoint:
        return None
    parsed = urlparse(checkpoint)
    if parsed.scheme not in ("", "file"):
        return None
    path = os.path.join(parsed.path if parsed.scheme else checkpoint, "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.loads(f.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


class DeltaDVStreamWriter(DataSourceStreamArrowWriter):
    """The sink of ``df.writeStream.format("deltadv")``: each micro-batch's tasks
    write data files as :class:`DeltaDVWriter`'s do (for the table as it is when
    the task runs: created by the first batch when absent), and :meth:`commit`
    commits them as ONE ``STREAMING UPDATE`` carrying the ``txn`` (appId = the
    query's id, version = the batch id) through deltadv's Rust transaction,
    which skips a batch the table holds already."""

    def __init__(self, batch: DeltaDVWriter, output_mode: str, checkpoint: str | None) -> None:
        self.batch = batch  # the table, schema, partitioning and options
        self.output_mode = output_mode  # "append" or "complete"
        self.checkpoint = checkpoint

    def _mode_now(self) -> str:
        """The mode files are written for now: complete overwrites (creating the
        table when absent); append appends, or creates the table."""
        from deltadv.exceptions import TableNotFoundError

        if self.output_mode == "complete":
            return "overwrite"
        try:
            DeltaTable(self.batch.table_uri, storage_options=self.batch.storage_options or None)
        except TableNotFoundError:
            return "error"
        return "append"

    def _writer(self, mode: str) -> DeltaDVWriter:
        import copy

        writer = copy.copy(self.batch)
        writer.mode = mode
        writer.skip = False
        return writer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaDVStreamCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        mode = self._mode_now()
        message = self._writer(mode).write(iterator)
        return DeltaDVStreamCommitMessage(message.adds, message.time_zone, query_id, mode)

    def _query_id(self, messages: Sequence[WriterCommitMessage | None]) -> str:
        ids = {m.query_id for m in messages if isinstance(m, DeltaDVStreamCommitMessage)}
        ids.discard(None)
        if len(ids) > 1:
            raise ValueError(f"deltadv: the tasks of one micro-batch report query ids {ids}")
        query_id = ids.pop() if ids else _checkpoint_query_id(self.checkpoint)
        if query_id is None:
            raise ValueError(
                "deltadv: the streaming sink cannot tell the query's id (no task reported "
                f"Spark's {QUERY_ID_PROPERTY!r} and the checkpoint's metadata file at "
                f"{self.checkpoint!r} cannot be read): it is the appId of the batch's txn"
            )
        return query_id

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from deltadv.exceptions import CommitConflictError, TableAlreadyExistsError

        ours = [m for m in messages if isinstance(m, DeltaDVStreamCommitMessage)]
        try:
            query_id = self._query_id(messages)
            modes = {m.mode for m in ours if m.adds} or {self._mode_now()}
            if len(modes) > 1:
                raise CommitConflictError(
                    f"deltadv: batch {batchId} of query {query_id}: the table at "
                    f"{self.batch.table_uri} was created while its tasks wrote (files written "
                    f"for modes {sorted(modes)}); the batch is retried when the query restarts"
                )
        except Exception:
            self.abort(messages, batchId)
            raise
        mode = modes.pop()
        try:
            self._writer(mode).commit_as(
                messages,
                mode,
                txn_app_id=query_id,
                txn_version=batchId,
                output_mode=self.output_mode,
            )
        except TableAlreadyExistsError as e:  # (the commit removed the files)
            # Another writer created the table after the tasks wrote their
            # files for a new one: a race lost (Delta Spark's sink raises a
            # concurrent modification), not a create refused.
            raise CommitConflictError(
                f"deltadv: batch {batchId} of query {query_id}: a Delta table was created at "
                f"{self.batch.table_uri} while the batch's tasks wrote files for a new one "
                f"({e}); the batch is retried when the query restarts"
            ) from e

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.batch.abort(messages)


def _stream_writer(
    options: Mapping[str, str], schema: StructType, overwrite: bool, time_zone: str | None
) -> DeltaDVStreamWriter:
    """The sink's writer: the options checked as df.write's (``partitionBy``,
    ``mergeSchema``, ``delta.*`` for a table the first batch creates, storage
    options), ``overwrite`` (Spark's complete output mode) meaning complete."""
    if not _ARROW_STREAM_WRITER:
        import pyspark

        raise NotImplementedError(
            f'deltadv: df.writeStream.format("deltadv") needs pyspark.sql.datasource.'
            f"DataSourceStreamArrowWriter, which PySpark {pyspark.__version__} lacks"
        )
    given = [k for k in options if k.lower() in BATCH_ONLY_KEYS]
    if given:
        raise ValueError(
            f"deltadv: option(s) {sorted(given)} are for df.write, not a stream (the sink "
            "makes each micro-batch idempotent with its query id and batch id)"
        )
    batch = _writer(options, schema, overwrite, time_zone)
    mapping = batch.configuration.get("delta.columnMapping.mode", "none").strip().lower()
    if mapping != "none":
        raise ValueError(
            "deltadv: the streaming sink cannot create a column-mapped table (its tasks and "
            "its commit would decide the physical names apart); create the table first "
            '(deltadv.write.write_table or df.write.format("deltadv"))'
        )
    return DeltaDVStreamWriter(
        batch, "complete" if overwrite else "append", options.get(CHECKPOINT_KEY)
    )
