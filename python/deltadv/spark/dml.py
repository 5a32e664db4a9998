"""Spark-side commands on a Delta table, in Delta Spark's shape:
``DeltaTable.forPath(spark, path).delete(condition)``, ``update``, ``merge``
(see :mod:`deltadv.spark.merge`), ``optimize``, ``purge``, ``vacuum``,
``restoreToVersion``, ``history``; and ``write_table`` (a DataFrame into a Delta
table). Executors do the reading and writing (``mapInArrow``); the driver plans
and commits once, through deltadv's public API.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from deltadv import DeltaTable as _LocalTable
from deltadv import (
    ScanTask,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedPredicateError,
)
from deltadv.spark._tasks import (
    TASK_COLUMN,
    change_writer,
    compact_runner,
    default_parallelism,
    session_time_zone,
    split_size,
    stage_partitions,
    task_frame,
    task_reader,
    task_slots,
    to_arrow_schema,
)
from deltadv.spark.merge import DeltaMergeBuilder, column_expressions
from deltadv.spark.read import read
from deltadv.spark.workers import require_workers
from deltadv.table import (
    DV_FILE_TARGET_SIZE,
    MAX_DELETED_ROWS_RATIO,
    TARGET_FILE_SIZE,
    PartitionFilters,
)
from deltadv.typecheck import check_arg, check_args

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class DeltaTable:
    """Spark-side DML on a Delta table, in Delta Spark's shape:
    ``DeltaTable.forPath(spark, path).delete("id < 10")``."""

    def __init__(
        self,
        spark: SparkSession,
        table_uri: str,
        storage_options: dict[str, str] | None = None,
        *,
        alias: str | None = None,
    ) -> None:
        check_args(
            {
                "table_uri": (table_uri, str, False),
                "storage_options": (storage_options, Mapping, True),
                "alias": (alias, str, True),
            },
            where="deltadv.spark.DeltaTable",
        )
        self._spark = spark
        self._uri = table_uri
        self._options = dict(storage_options or {})
        self._table = _LocalTable(table_uri, storage_options=self._options)
        self._alias = alias

    @classmethod
    def forPath(
        cls,
        spark: SparkSession,
        path: str,
        storage_options: dict[str, str] | None = None,
    ) -> DeltaTable:
        return cls(spark, path, storage_options)

    def toDF(self) -> DataFrame:
        """The table's current rows (deletion vectors applied)."""
        return read(self._spark, self._uri, storage_options=self._options)

    def delete(
        self,
        condition: str | Column | None = None,
        *,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
    ) -> dict[str, Any]:
        """DELETE the rows matching ``condition`` (any Spark SQL condition or Column;
        None: every row) with deletion vectors; returns the operation metrics.

        A condition in deltadv's predicate subset that names only partition columns
        removes whole files without reading them; other conditions prune files by
        partitions and stats, then the remaining candidates are read on the
        executors with each row's data file and physical row index, Spark evaluates
        the condition, and each executor task writes ONE DV file (old DV | new rows)
        for the files it got. The driver commits remove+add pairs with
        put-if-absent, rebasing over concurrent deletes of other rows of the same
        files.
        """
        from pyspark.sql.pandas.types import from_arrow_schema

        table = self._table
        table.update_incremental()
        text = condition if isinstance(condition, str) else None
        if condition is None or (text is not None and _is_partition_only(table, text)):
            return table.delete(
                text,
                inline_threshold=inline_threshold,
                dv_file_target_size=dv_file_target_size,
                time_zone=session_time_zone(self._spark),
            )
        # Analyze the condition against the table's own columns first: errors then
        # name only the table's columns, and history records Spark's SQL text.
        predicate_sql = _condition_sql(self._spark, table, condition)
        tasks = self._candidate_tasks(condition)
        if not tasks:
            return table.delete_rows({}, inline_threshold=inline_threshold)
        schema = from_arrow_schema(tasks[0].schema(), prefer_timestamp_ntz=True)
        spark = self._spark
        sizes = [t.size for t in tasks]
        task_df = task_frame(spark, [(t.json,) for t in tasks], f"{TASK_COLUMN} string", sizes)
        reader = task_reader(tasks[0].storage_options)
        rows = task_df.mapInArrow(reader, schema)
        rows = rows.filter(condition).select("_file_path", "_row_index")
        files = sorted({t.path for t in tasks})
        delete_task = table.delete_task(
            files, inline_threshold=inline_threshold, dv_file_target_size=dv_file_target_size
        )
        parts = max(1, min(len(files), default_parallelism(spark) * 2))

        def write_dvs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            by_file: dict[str, list[int]] = {}
            for batch in batches:
                paths = batch.column("_file_path").to_pylist()
                indexes = batch.column("_row_index").to_pylist()
                for path, index in zip(paths, indexes, strict=True):
                    by_file.setdefault(path, []).append(index)
            if not by_file:
                return
            prepared = delete_task.prepare(by_file)
            yield pa.record_batch([pa.array(prepared, pa.string())], names=["prepared"])

        prepared = (
            rows.repartition(parts, "_file_path").mapInArrow(write_dvs, "prepared string").collect()
        )
        return table.commit_delete(
            [r["prepared"] for r in prepared],
            predicate=predicate_sql,
            inline_threshold=inline_threshold,
        )

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
        *,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        target_file_size: int = TARGET_FILE_SIZE,
    ) -> dict[str, Any]:
        """UPDATE the rows matching ``condition`` (any Spark SQL condition or Column;
        None: every row), setting each column of ``set`` to its value (Spark SQL
        text or a Column), with deletion vectors; returns the operation metrics
        (Delta Spark's UPDATE metrics, snake_case).

        Files that a condition in deltadv's predicate subset rules out by partition
        values or stats are not read. The rest are read on the executors with each
        row's data file and physical row index; Spark evaluates the condition and
        the new values (cast to the columns' types); each executor task writes the
        updated rows into new data files and ONE DV file (old DV | updated rows)
        for the files it got. The driver commits once, rebasing over concurrent
        changes to other rows of the same files.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        if not set:
            raise ValueError("set must name at least one column to update")
        table = self._table
        table.update_incremental()
        table_schema = from_arrow_schema(table.schema(), prefer_timestamp_ntz=True)
        by_name = {f.name.lower(): f for f in table_schema.fields}
        values: dict[str, Column] = {}
        for column, value in set.items():
            field = by_name.get(column.lower())
            if field is None:
                raise ValueError(
                    f"UPDATE sets column {column!r}, which is not in the table "
                    f"(columns: {', '.join(f.name for f in table_schema.fields)})"
                )
            if field.name in values:
                raise ValueError(f"UPDATE sets column {column!r} more than once")
            expr = F.expr(value) if isinstance(value, str) else value
            values[field.name] = expr.cast(field.dataType).alias(field.name)
        predicate_sql = None if condition is None else _condition_sql(self._spark, table, condition)
        tasks = self._candidate_tasks(condition)
        if not tasks:
            return table.commit_changes("UPDATE", [], predicate=predicate_sql)
        spark = self._spark
        rows = self._rows_with_metadata(tasks, table_schema.fields)
        if condition is not None:
            rows = rows.filter(condition)
        rows = rows.select(
            *[values.get(f.name, F.col(f"`{f.name}`")) for f in table_schema.fields],
            "_file_path",
            "_row_index",
        )
        # Generated columns the SET leaves alone follow the new row (Spark
        # evaluates Delta's generation expression); the writer checks them.
        generated = {
            name: sql for name, sql in column_expressions(table)[0].items() if name not in values
        }
        if generated:
            rows = rows.select(
                *[
                    F.expr(generated[f.name]).cast(f.dataType).alias(f.name)
                    if f.name in generated
                    else F.col(f"`{f.name}`")
                    for f in table_schema.fields
                ],
                "_file_path",
                "_row_index",
            )
        files = sorted({t.path for t in tasks})
        change_task = table.change_task(
            files,
            inline_threshold=inline_threshold,
            dv_file_target_size=dv_file_target_size,
            target_file_size=target_file_size,
            time_zone=session_time_zone(spark),
        )
        parts = max(1, min(len(files), default_parallelism(spark) * 2))
        prepared = (
            rows.repartition(parts, "_file_path")
            .mapInArrow(change_writer(change_task), "prepared string")
            .collect()
        )
        return table.commit_changes(
            "UPDATE",
            [r["prepared"] for r in prepared],
            predicate=predicate_sql,
            read_files=files,
            inline_threshold=inline_threshold,
        )

    def _rows_with_metadata(self, tasks: list[ScanTask], fields: list[Any]) -> DataFrame:
        """The rows of ``tasks`` read on the executors, with ``_file_path`` and
        ``_row_index`` (an empty frame of that schema when there are none)."""
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        spark = self._spark
        if not tasks:
            schema = StructType(
                [
                    *fields,
                    StructField("_file_path", StringType()),
                    StructField("_row_index", LongType()),
                ]
            )
            return spark.createDataFrame([], schema)
        schema = from_arrow_schema(tasks[0].schema(), prefer_timestamp_ntz=True)
        task_df = task_frame(spark, [(t.json,) for t in tasks], f"{TASK_COLUMN} string")
        reader = task_reader(tasks[0].storage_options)
        return task_df.mapInArrow(reader, schema)

    def alias(self, alias: str) -> DeltaTable:
        """This table under ``alias``, for MERGE conditions (``t.id = s.id``)."""
        check_arg("alias", alias, str)
        return DeltaTable(self._spark, self._uri, self._options, alias=alias)

    def merge(
        self,
        source: DataFrame,
        condition: str | Column,
        *,
        inline_threshold: int = 0,
        dv_file_target_size: int = DV_FILE_TARGET_SIZE,
        target_file_size: int = TARGET_FILE_SIZE,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> DeltaMergeBuilder:
        """MERGE ``source`` into this table on ``condition`` (Delta Spark's builder):
        ``dt.alias("t").merge(df.alias("s"), "t.id = s.id").whenMatchedUpdateAll()
        .whenNotMatchedInsertAll().execute()``. Clauses: ``whenMatchedUpdate(condition,
        set)``, ``whenMatchedUpdateAll``, ``whenMatchedDelete``,
        ``whenNotMatchedInsert(condition, values)``, ``whenNotMatchedInsertAll``,
        ``whenNotMatchedBySourceUpdate(condition, set)``,
        ``whenNotMatchedBySourceDelete``; in each kind the first clause whose
        condition holds acts. Spark runs the join; executors write DVs and new
        files; the driver commits once. ``execute()`` returns the metrics.

        ``txn_app_id`` / ``txn_version`` (together; Delta Spark's ``txnAppId`` /
        ``txnVersion``) make it idempotent, e.g. in ``foreachBatch`` with the
        batch id: the commit carries Delta's ``txn`` action, and a MERGE whose
        version the table holds already for that application runs nothing
        (``execute()`` returns ``{"version": None, "skipped": True}``)."""
        return DeltaMergeBuilder(
            self._spark,
            self._table,
            self._alias,
            source,
            condition,
            {
                "inline_threshold": inline_threshold,
                "dv_file_target_size": dv_file_target_size,
                "target_file_size": target_file_size,
                "txn_app_id": txn_app_id,
                "txn_version": txn_version,
            },
        )

    def _candidate_tasks(self, condition: str | Column | None) -> list[ScanTask]:
        """Scan tasks (with row metadata) for the files a condition may touch:
        pruned by partitions and stats when it is text in deltadv's subset."""
        table = self._table
        size = split_size(self._spark)
        if isinstance(condition, str):
            try:
                return table.scan_tasks(
                    None,
                    condition,
                    filter_rows=False,
                    split_size=size,
                    with_metadata=True,
                    time_zone=session_time_zone(self._spark),
                )
            except UnsupportedPredicateError:
                pass  # outside deltadv's subset: Spark alone filters
        return table.scan_tasks(split_size=size, with_metadata=True)

    def purge(
        self, partition_filters: PartitionFilters | None = None, target_size: int | None = None
    ) -> dict[str, Any]:
        """``REORG TABLE ... APPLY (PURGE)`` (see :meth:`deltadv.DeltaTable.purge`),
        one Spark task per bin of files: the executors rewrite the files, the
        driver commits once."""
        return self._compact("purge", target_size, MAX_DELETED_ROWS_RATIO, partition_filters)

    def optimize(
        self,
        target_size: int | None = None,
        partition_filters: PartitionFilters | None = None,
        max_deleted_rows_ratio: float = MAX_DELETED_ROWS_RATIO,
        full: bool = False,
    ) -> dict[str, Any]:
        """``OPTIMIZE`` (see :meth:`deltadv.DeltaTable.optimize`; ``full``: ``OPTIMIZE
        ... FULL``), one Spark task per bin of files; the driver commits once."""
        return self._compact(
            "optimize", target_size, max_deleted_rows_ratio, partition_filters, full
        )

    def _compact(
        self,
        mode: str,
        target_size: int | None,
        ratio: float,
        partition_filters: PartitionFilters | None,
        full: bool = False,
    ) -> dict[str, Any]:
        table = self._table
        table.update_incremental()
        check_arg("target_size", target_size, int, optional=True)
        check_arg("max_deleted_rows_ratio", ratio, (int, float))
        check_arg("full", full, bool)
        plan, tasks = table.compact_tasks(mode, target_size, ratio, partition_filters, full)
        results: list[str] = []
        if tasks:
            task_df = task_frame(self._spark, [(t,) for t in tasks], f"{TASK_COLUMN} string")
            runner = compact_runner(table.table_uri, self._options)
            # A failed task removes what it wrote; files of tasks that finished
            # before a failure are referenced by nothing (VACUUM removes them).
            rows = task_df.mapInArrow(runner, "added string").collect()
            results = [r["added"] for r in rows]
        return table.commit_compaction(plan, results, partition_filters)

    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delta Spark's ``vacuum(retentionHours)``: delete the files no version in
        the retention reads (see :meth:`deltadv.DeltaTable.vacuum`; the retention
        check is on). Returns a one-column DataFrame of the deleted paths."""
        table = self._table
        table.update_incremental()
        files = table.vacuum(retentionHours, dry_run=False)
        return self._spark.createDataFrame([(f,) for f in files], "path string")

    def restoreToVersion(self, version: int) -> dict[str, Any]:
        """Delta Spark's ``restoreToVersion``: see :meth:`deltadv.DeltaTable.restore`."""
        self._table.update_incremental()
        return self._table.restore(version)

    def restoreToTimestamp(self, timestamp: str | datetime) -> dict[str, Any]:
        """Delta Spark's ``restoreToTimestamp``: see :meth:`deltadv.DeltaTable.restore`."""
        self._table.update_incremental()
        return self._table.restore(timestamp)

    def history(self, limit: int | None = None) -> DataFrame:
        """The table's commits, newest first, as a DataFrame with the columns of
        Delta Spark's ``DeltaTable.history()`` / ``DESCRIBE HISTORY``."""
        from datetime import datetime, timezone

        self._table.update_incremental()
        check_arg("limit", limit, int, optional=True)
        rows = []
        # Delta Spark's commit time (``commitTimestamp``): decided by the Rust core.
        for info in self._table.history(limit):
            ts = info.get("commitTimestamp")
            rows.append(
                (
                    info["version"],
                    None if ts is None else datetime.fromtimestamp(ts / 1000, timezone.utc),
                    info.get("userId"),
                    info.get("userName"),
                    info.get("operation"),
                    _string_map(info.get("operationParameters")),
                    None,  # job
                    None,  # notebook
                    info.get("clusterId"),
                    info.get("readVersion"),
                    info.get("isolationLevel"),
                    info.get("isBlindAppend"),
                    _string_map(info.get("operationMetrics")),
                    info.get("userMetadata"),
                    info.get("engineInfo"),
                )
            )
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)


#: Delta Spark's DESCRIBE HISTORY schema.
HISTORY_SCHEMA = (
    "version bigint, timestamp timestamp, userId string, userName string, operation string, "
    "operationParameters map<string,string>, "
    "job struct<jobId:string,jobName:string,jobRunId:string,runId:string,jobOwnerId:string,"
    "triggerType:string>, notebook struct<notebookId:string>, clusterId string, "
    "readVersion bigint, isolationLevel string, isBlindAppend boolean, "
    "operationMetrics map<string,string>, userMetadata string, engineInfo string"
)


def _string_map(value: Any) -> dict[str, str] | None:
    """A commitInfo map as Delta Spark shows it: values as strings (JSON for non-strings)."""
    if value is None:
        return None
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _is_partition_only(table: _LocalTable, text: str) -> bool:
    """Whether ``text`` parses in deltadv's subset and names only partition columns."""
    try:
        return table.predicate_is_partition_only(text)
    except UnsupportedPredicateError:
        return False


def _condition_sql(spark: SparkSession, table: _LocalTable, condition: str | Column) -> str:
    """``condition`` analyzed against an empty frame with the table's columns (Spark's
    AnalysisException for unknown columns, naming only the table's columns), as SQL
    text for the history's ``predicate``: a string as given; a Column as the SQL
    :func:`_column_sql` renders from its text form, checked by Spark to mean the
    same (``sameSemantics``). Public API only, so the same on Spark Connect and
    classic sessions. (Delta Spark records the analyzed condition's SQL, implicit
    casts spelt out: the same condition, another spelling.)"""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(table.schema(), prefer_timestamp_ntz=True)
    base = spark.createDataFrame([], schema)
    column = F.expr(condition) if isinstance(condition, str) else condition
    frame = base.filter(column)
    frame.schema  # noqa: B018 (analyzes the plan: unknown columns fail here)
    if isinstance(condition, str):
        return condition
    for text in _column_sql(repr(column), schema.fieldNames()):
        try:
            if base.filter(F.expr(text)).sameSemantics(frame):
                return text
        except Exception:  # a candidate Spark cannot parse or resolve
            continue
    raise TypeError(
        "the condition's SQL text (for the table's history) cannot be read from this "
        f"Column: pass it as a SQL string, got {column!r}"
    )


#: Spark's function names for the operators a Column's text form shows as calls
#: (``>=(id, 5)``), and the SQL operator each is.
_INFIX = {
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "<>",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "<=>": "<=>",
    "and": "AND",
    "or": "OR",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "like": "LIKE",
    "ilike": "ILIKE",
    "rlike": "RLIKE",
}
_PREFIX = {"!": "NOT ", "not": "NOT ", "negative": "- "}
_POSTFIX = {"isnull": " IS NULL", "isnotnull": " IS NOT NULL"}
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?(L|S|Y|D|BD)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _column_sql(text: str, columns: list[str]) -> list[str]:
    """Candidate SQL texts for a Column from its ``repr``: the text itself (a
    ``F.expr`` Column shows its SQL), then the text with Spark's call forms
    (``or(>=(id, 5), =(s, 'v'))``, what classic and Connect Columns show) turned
    into SQL operators, bare words that are no column of ``columns`` quoted as
    strings (Spark Connect shows string literals unquoted). The caller keeps the
    first one Spark finds to mean the same as the Column."""
    if text.startswith("Column<'") and text.endswith("'>"):
        text = text[len("Column<'") : -len("'>")]
    known = {c.lower() for c in columns}
    candidates = [text]
    try:
        rendered, end = _render(text, 0, known)
    except ValueError:
        return candidates
    if end == len(text) and rendered != text and not rendered.startswith("'"):
        candidates.append(rendered)
    return candidates


def _render(text: str, i: int, known: set[str]) -> tuple[str, int]:
    """The SQL of the expression at ``text[i:]`` in a Column's call form, and where
    it ends; ValueError where the form is not one this reads."""
    if text.startswith("'", i):  # a quoted string literal, backslash escapes
        j = i + 1
        while j < len(text) and text[j] != "'":
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise ValueError("unterminated string")
        return text[i : j + 1], j + 1
    if text.startswith("CAST(", i):
        inner, j = _render(text, i + len("CAST("), known)
        if not text.startswith(" AS ", j):
            raise ValueError("CAST without AS")
        close = text.find(")", j)
        if close < 0:
            raise ValueError("unterminated CAST")
        return f"CAST({inner} AS {text[j + 4 : close]})", close + 1
    j = i
    while j < len(text) and text[j] not in "()," and not text.startswith(" AS ", j):
        j += 1
    word = text[i:j].strip()
    if j < len(text) and text[j] == "(" and word and " " not in word:
        args, j = [], j + 1
        while True:
            if text.startswith(")", j):
                j += 1
                break
            arg, j = _render(text, j, known)
            args.append(arg)
            if text.startswith(", ", j):
                j += 2
            elif not text.startswith(")", j):
                raise ValueError(f"unexpected text at {j}")
        name = word.lower()
        if name in _INFIX and len(args) == 2:
            return f"({args[0]} {_INFIX[name]} {args[1]})", j
        if name in _PREFIX and len(args) == 1:
            return f"({_PREFIX[name]}{args[0]})", j
        if name in _POSTFIX and len(args) == 1:
            return f"({args[0]}{_POSTFIX[name]})", j
        if name == "in" and args:
            return f"({args[0]} IN ({', '.join(args[1:])}))", j
        return f"{word}({', '.join(args)})", j
    return _atom(word, known), j


def _atom(word: str, known: set[str]) -> str:
    """A column (backquoted unless a plain name), a number, NULL/TRUE/FALSE, or
    else a string literal Spark Connect shows unquoted."""
    if word.startswith("`") or word.upper() in ("NULL", "TRUE", "FALSE") or _NUMBER.fullmatch(word):
        return word
    if word.lower() in known or word.split(".")[0].lower() in known:
        if _NAME.fullmatch(word):
            return word
        return "`" + word.replace("`", "``") + "`"
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_table(
    df: DataFrame,
    table_uri: str,
    *,
    mode: Literal["error", "append"] = "error",
    partition_by: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    configuration: dict[str, str] | None = None,
    enable_deletion_vectors: bool = True,
    target_file_size: int = TARGET_FILE_SIZE,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> _LocalTable:
    """Write a Spark DataFrame to a Delta table: create it (``mode="error"``,
    deletion vectors enabled by default) or append to it (``mode="append"``).

    Each executor task streams its Arrow batches into deltadv's Rust writer
    (:func:`deltadv.write.write_files`), which writes parquet data files with
    Delta stats straight to the table's storage and returns their add actions;
    the driver commits them all at once (:func:`deltadv.write.commit_files`),
    which removes them if the commit fails. Identity columns get values in each
    task's slot (its partition index), interleaved across the stage's tasks as
    Delta Spark's (``start + step * (index + k * tasks)``, the same values Delta
    Spark's append of the same partitions gives), and the commit raises their
    high-water marks to the last values handed out. Generated columns and CHECK constraints
    read TIMESTAMPs in the session's ``spark.sql.session.timeZone``, as Delta
    Spark does.

    ``txn_app_id`` / ``txn_version`` (together; Delta Spark's ``txnAppId`` /
    ``txnVersion`` writer options) make the write idempotent, e.g. in
    ``foreachBatch`` with the batch id: the commit carries Delta's ``txn``
    action, and a write whose version the table holds already for that
    application writes nothing."""
    from deltadv.write import commit_files, write_files

    if (txn_app_id is None) != (txn_version is None):
        raise ValueError(
            "deltadv: txn_app_id and txn_version go together (Delta Spark's txnAppId / "
            f"txnVersion); given txn_app_id={txn_app_id!r}, txn_version={txn_version!r}"
        )
    if txn_app_id is not None and txn_version is not None and mode == "append":
        # An early skip (no Spark job): the Rust commit would skip it anyway.
        table = _LocalTable(table_uri, storage_options=storage_options)
        if table.transaction_applied(txn_app_id, txn_version):
            return table

    parts = list(partition_by or [])
    options = dict(storage_options or {})
    conf = dict(configuration or {})
    schema = to_arrow_schema(df.schema)
    _check_target(table_uri, mode, storage_options)
    require_workers(df.sparkSession)
    tasks = stage_partitions(df)
    time_zone = session_time_zone(df.sparkSession)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        first = next(batches, None)
        if first is None:
            return
        data = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
        slot, slots = task_slots(tasks)
        adds = write_files(
            table_uri,
            data,
            mode=mode,
            schema=schema,
            partition_by=parts,
            storage_options=options,
            configuration=conf,
            enable_deletion_vectors=enable_deletion_vectors,
            target_file_size=target_file_size,
            identity_slot=slot,
            identity_slots=slots,
            time_zone=time_zone,
        )
        if adds:
            yield pa.record_batch([pa.array([json.dumps(a) for a in adds])], names=["add"])

    rows = df.mapInArrow(write, "add string").collect()
    commit_files(
        table_uri,
        [json.loads(r["add"]) for r in rows],
        mode=mode,
        schema=schema,
        partition_by=parts,
        storage_options=storage_options,
        configuration=conf,
        enable_deletion_vectors=enable_deletion_vectors,
        txn_app_id=txn_app_id,
        txn_version=txn_version,
    )
    return _LocalTable(table_uri, storage_options=storage_options)


def _check_target(table_uri: str, mode: str, storage_options: dict[str, str] | None) -> None:
    """On the driver, before any task runs: TableAlreadyExistsError for mode
    "error" on an existing table, TableNotFoundError for mode "append" on none."""
    try:
        existing = _LocalTable(table_uri, storage_options=storage_options)
    except TableNotFoundError:
        if mode == "append":
            raise
        return
    if mode == "error":
        raise TableAlreadyExistsError(
            f"a Delta table already exists at {existing.table_uri} (version {existing.version()})"
        )
