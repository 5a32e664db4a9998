"""MERGE from Spark, in Delta Spark's builder shape (plain Python over the public API).

``deltadv.spark.DeltaTable.forPath(spark, uri).alias("t").merge(src.alias("s"),
"t.id = s.id").whenMatchedUpdate(...)...execute()``.

The join runs in Spark: the table is read with each row's ``_file_path`` and
``_row_index`` (deletion vectors applied) and joined with the source on the
condition (inner, left, right or full outer, as the clauses need). One CASE per
column picks each row's clause -- the first of its kind whose condition holds
-- and its new values; rows no clause acts on are dropped. The change stream
(new values + ``_change``) is repartitioned by data file, and each executor
task writes new data files and ONE DV file (:class:`deltadv.ChangeTask`); the
driver commits once, as a MERGE with Delta Spark's parameters and metrics.

Concurrent commits (Delta Spark's conflict rules, checked by the Rust
transaction): a MERGE with NOT MATCHED [BY SOURCE] clauses depends on the whole
table, so a data file another writer added meanwhile may conflict
(``CommitConflictError``, Delta Spark's ``ConcurrentAppendException``) unless that
writer was a blind append (``INSERT``, ``write_table(mode="append")``) under the
default ``WriteSerializable`` isolation and the MERGE changes no metadata (schema
evolution, identity high-water marks); a MERGE without them depends only on the
files it read. A MERGE that inserts, without NOT MATCHED BY SOURCE clauses, checks
such a file as deltadv's in-process MERGE (:meth:`deltadv.DeltaTable.merge`) does,
in the Rust commit: a file in a partition its condition's target-only partition
predicates exclude (``t.part = 'a' AND ...``, Delta Spark's read set) is no
conflict, nor one none of whose rows has one of the source's join keys. The keys
are the source columns the condition names, collected on the driver (the
broadcast source already is; a larger one is collected while its keys fit
``MergePlan.SOURCE_KEYS_LIMIT``, else any file in the partitions read conflicts).
A condition given as a Column is not checked row by row (any such file conflicts).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from deltadv import ChangeTask, MergePlan, ScanTask
from deltadv import DeltaTable as _LocalTable
from deltadv.spark._tasks import (
    arrow_frame,
    broadcast_threshold,
    collect_arrow,
    default_parallelism,
    explain_text,
    session_time_zone,
    split_size,
    task_frame,
    task_slots,
    to_arrow_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

DUPLICATE_ERROR = MergePlan.DUPLICATE_MATCH_ERROR
_CLAUSE = "__deltadv_clause"
_SOURCE = "__deltadv_source"
_SOURCE_ID = "__deltadv_source_id"
_MATCHED_ID = "__deltadv_matched_id"
_FILE_ID = "__deltadv_file_id"

#: (kind, action, condition, assignments); kinds and actions as the Rust core names them.
_Clause = tuple[str, str, "str | Column | None", "Mapping[str, str | Column] | None"]


def column_expressions(table: _LocalTable) -> tuple[dict[str, str], dict[str, str]]:
    """The table's generated columns and column defaults: top-level name ->
    Delta's generation expression / default (Spark SQL), from the column
    metadata."""
    schema = json.loads(table.metadata()["schemaString"])
    generated: dict[str, str] = {}
    defaults: dict[str, str] = {}
    for field in schema.get("fields", []):
        meta = field.get("metadata") or {}
        if isinstance(meta.get("delta.generationExpression"), str):
            generated[field["name"]] = meta["delta.generationExpression"]
        if isinstance(meta.get("CURRENT_DEFAULT"), str):
            defaults[field["name"]] = meta["CURRENT_DEFAULT"]
    return generated, defaults


#: Plan nodes that keep their child's column qualifiers (an alias under them still
#: names the frame's columns).
_QUALIFIER_KEEPING = {
    "Filter",
    "Sort",
    "GlobalLimit",
    "LocalLimit",
    "Offset",
    "Sample",
    "Distinct",
    "Deduplicate",
    "Repartition",
    "RepartitionByExpression",
    "ResolvedHint",
}


def _analyzed_lines(df: DataFrame) -> list[str]:
    """The lines of ``df``'s analyzed plan as ``explain(mode="extended")`` prints it
    (classic and Spark Connect alike), its schema line left out."""
    text = explain_text(df, "extended")
    section = text.split("== Analyzed Logical Plan ==", 1)[-1]
    section = section.split("== Optimized Logical Plan ==", 1)[0]
    return [line for line in section.strip("\n").splitlines()[1:] if line.strip()]


def _alias_of(df: DataFrame) -> str | None:
    """The alias of ``df`` (``df.alias("s")``), read from its analyzed plan: the
    top node's alias, or that under filters, limits, sorts, ... (which keep the
    alias's qualifier on all columns). None when there is none."""
    for line in _analyzed_lines(df):
        node = re.sub(r"^[\s:|+-]*", "", line)
        kind = node.split(" ", 1)[0]
        if kind == "SubqueryAlias":
            name = node.split(" ", 1)[1].strip() if " " in node else ""
            return name.rsplit(".", 1)[-1].strip("`") or None
        if kind not in _QUALIFIER_KEEPING:
            return None
    return None


def _conjuncts(text: str) -> list[str]:
    """The top-level AND operands of a printed condition (outer parentheses off)."""
    text = text.strip()
    while text.startswith("(") and _closing(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and text.startswith(" AND ", i):
            parts.append(text[start:i])
            start = i + 5
            i += 5
            continue
        i += 1
    parts.append(text[start:])
    if len(parts) == 1:
        return parts
    return [c for p in parts for c in _conjuncts(p)]


def _closing(text: str, at: int) -> int:
    depth = 0
    for i in range(at, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            return i
    return -1


_ATTRIBUTE = re.compile(r"^(?:cast\()*([^\s#()]+)#(\d+)L?(?: as [^()]+\))*$")


def _key_values(joined: DataFrame, local: pa.Table, readable: set[str]) -> dict[str, Any]:
    """For the equalities ``target.col = source.col`` among the top-level ANDs of
    the analyzed join condition (read from ``explain``, classic and Spark Connect
    alike): target column -> the distinct values of the source column in
    ``local`` (the small source, collected). Empty when there are none or the
    plan's shape is not recognized (no pushdown then; the MERGE is the same)."""
    lines = _analyzed_lines(joined)
    if not lines or not lines[0].startswith("Join "):
        return {}
    head = lines[0]
    condition = head.split(", ", 1)[1] if ", " in head else ""
    # the left child's subtree: the lines up to the right child's ("+- ")
    left_text = []
    for line in lines[1:]:
        if line.startswith("+- "):
            break
        left_text.append(line)
    target_ids = set(re.findall(r"#(\d+)", "\n".join(left_text)))
    pairs: list[tuple[str, str]] = []
    for part in _conjuncts(condition):
        part = part.strip()
        if part.startswith("(") and _closing(part, 0) == len(part) - 1:
            part = part[1:-1]
        sides = part.split(" = ")
        if len(sides) != 2:
            continue
        found = [_ATTRIBUTE.match(side.strip()) for side in sides]
        if not all(found):
            continue
        (a, b) = [(f.group(2) in target_ids, f.group(1)) for f in found if f]
        if a[0] != b[0]:
            t, src = (a[1], b[1]) if a[0] else (b[1], a[1])
            if t in readable:
                pairs.append((t, src))
    out: dict[str, Any] = {}
    names = {n.lower(): n for n in local.column_names}
    for t, src in pairs:
        column = names.get(src.lower())
        if column is None:
            continue
        out[t] = pc.drop_null(pc.unique(local.column(column))).to_pylist()
    return out


def _text(c: str | Column | None) -> str | None:
    return None if c is None else c if isinstance(c, str) else str(c)


def _target_rows(
    spark: SparkSession,
    tasks: list[ScanTask],
    paths: list[str],
    fields: list[Any],
    keys: dict[str, Any] | None = None,
) -> DataFrame:
    """The rows of ``tasks`` (the table's ``fields``) read on the executors, with
    ``_row_index`` and the number of their file in ``paths`` (``_FILE_ID``);
    with ``keys`` (column -> values), only rows whose columns hold one of the
    values."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    schema = StructType(
        [*fields, StructField("_row_index", LongType()), StructField(_FILE_ID, IntegerType())]
    )
    if not tasks:
        return spark.createDataFrame([], schema)
    index = {p: i for i, p in enumerate(paths)}
    rows = [(t.json, index[t.path]) for t in tasks]
    task_df = task_frame(spark, rows, "task string, file int", [t.size for t in tasks])
    options = tasks[0].storage_options
    arrow = tasks[0].schema()
    keep = [n for n in arrow.names if n != "_file_path"]
    schema = from_arrow_schema(
        pa.schema([arrow.field(n) for n in keep] + [pa.field(_FILE_ID, pa.int32())]),
        prefer_timestamp_ntz=True,
    )

    wanted: dict[str, pa.Array] = {}
    for column, values in (keys or {}).items():
        try:
            wanted[column] = pa.array(values).cast(arrow.field(column).type)
        except (pa.ArrowException, KeyError):
            continue  # values that do not convert exactly: this key does not filter

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task, file in zip(
                batch.column("task").to_pylist(), batch.column("file").to_pylist(), strict=True
            ):
                for b in ScanTask(task, options).read():
                    if wanted:
                        mask = None
                        for column, values in wanted.items():
                            hit = pc.is_in(b.column(column), value_set=values)
                            mask = hit if mask is None else pc.and_(mask, hit)
                        b = b.filter(mask)
                        if b.num_rows == 0:
                            continue
                    ids = pa.repeat(pa.scalar(file, pa.int32()), b.num_rows)
                    yield pa.RecordBatch.from_arrays(
                        [*b.select(keep).columns, ids], names=[*keep, _FILE_ID]
                    )

    return task_df.mapInArrow(read, schema)


def _counting_writer(
    task: ChangeTask, slots: int, driver_slot: tuple[int, int | None]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow body: count rows per clause, drop the clause column, write
    the rest with ``task``; one row with the prepared JSON and the counts.
    Identity values of inserted rows are handed out in the Spark task's slot (its
    partition index, of ``slots``: interleaved as Delta Spark's), or
    ``driver_slot`` (slot, number of slots) when run on the driver."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counts: dict[int, int] = {}
        matched: list[pa.Array] = []

        def strip(bs: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in bs:
                drop = [_CLAUSE]
                if _SOURCE_ID in b.schema.names:
                    matched.append(pc.drop_null(b.column(_SOURCE_ID)))
                    drop.append(_SOURCE_ID)
                    # Matched pairs no clause acts on only report their source row.
                    b = b.filter(pc.is_valid(b.column(_CLAUSE)))
                for c in b.column(_CLAUSE).to_pylist():
                    counts[c] = counts.get(c, 0) + 1
                yield b.drop_columns(drop)

        stream = strip(batches)
        first = next(stream, None)
        if first is None:
            ids = pc.unique(pa.chunked_array(matched, pa.int64())).to_pylist() if matched else []
            if ids:  # nothing to write, but matched source rows to report
                yield pa.record_batch(
                    [
                        pa.array([None], pa.string()),
                        pa.array(["{}"]),
                        pa.array([0], pa.int64()),
                        pa.array([json.dumps(ids)]),
                    ],
                    names=["prepared", "counts", "ms", "matched"],
                )
            return
        data = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], stream))
        started = _now_ms()
        slot, count = task_slots(slots)
        if slot is None:
            slot, count = driver_slot
        prepared = task.prepare(data, slot, count)
        # prepare() pulls the stream: its time is the join's and the write's.
        ms = _now_ms() - started
        ids = pc.unique(pa.chunked_array(matched, pa.int64())).to_pylist() if matched else []
        yield pa.record_batch(
            [
                pa.array([prepared]),
                pa.array([json.dumps(counts)]),
                pa.array([ms], pa.int64()),
                pa.array([json.dumps(ids)]),
            ],
            names=["prepared", "counts", "ms", "matched"],
        )

    return write


class DeltaMergeBuilder:
    """A MERGE being built from Spark; made by :meth:`deltadv.spark.DeltaTable.merge`.
    Clause methods return the builder; :meth:`execute` runs it."""

    def __init__(
        self,
        spark: SparkSession,
        table: _LocalTable,
        target_alias: str | None,
        source: DataFrame,
        condition: str | Column,
        options: dict[str, Any],
    ) -> None:
        self._spark = spark
        self._table = table
        self._target_alias = target_alias
        self._source = source
        self._condition = condition
        self._options = options
        self._clauses: list[_Clause] = []
        self._evolve = False

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """Add source columns the table lacks (nullable, in the MERGE's commit)
        when a ``whenMatchedUpdateAll`` / ``whenNotMatchedInsertAll`` writes them."""
        self._evolve = True
        return self

    def _add(
        self,
        kind: str,
        action: str,
        condition: str | Column | None,
        values: Mapping[str, str | Column] | None = None,
        what: str = "",
    ) -> DeltaMergeBuilder:
        if values is not None and (not isinstance(values, Mapping) or not values):
            raise ValueError(f"{what} needs a non-empty mapping of column -> value")
        self._clauses.append((kind, action, condition, values))
        return self

    def whenMatchedUpdate(
        self, condition: str | Column | None = None, set: Mapping[str, str | Column] | None = None
    ) -> DeltaMergeBuilder:
        if set is None:
            raise ValueError("whenMatchedUpdate needs set={column: value}")
        return self._add("matched", "update", condition, set, "whenMatchedUpdate")

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        return self._add("matched", "update_all", condition)

    def whenMatchedDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        return self._add("matched", "delete", condition)

    def whenNotMatchedInsert(
        self,
        condition: str | Column | None = None,
        values: Mapping[str, str | Column] | None = None,
    ) -> DeltaMergeBuilder:
        if values is None:
            raise ValueError("whenNotMatchedInsert needs values={column: value}")
        return self._add("not_matched", "insert", condition, values, "whenNotMatchedInsert")

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        return self._add("not_matched", "insert_all", condition)

    def whenNotMatchedBySourceUpdate(
        self, condition: str | Column | None = None, set: Mapping[str, str | Column] | None = None
    ) -> DeltaMergeBuilder:
        if set is None:
            raise ValueError("whenNotMatchedBySourceUpdate needs set={column: value}")
        return self._add(
            "not_matched_by_source", "update", condition, set, "whenNotMatchedBySourceUpdate"
        )

    def whenNotMatchedBySourceDelete(
        self, condition: str | Column | None = None
    ) -> DeltaMergeBuilder:
        return self._add("not_matched_by_source", "delete", condition)

    def _plan(self, target_alias: str, source_alias: str | None) -> MergePlan:
        """The MERGE's rules from the Rust core: clause order and shapes
        checked there, as the in-process MERGE checks them."""
        clauses = [
            (
                kind,
                action,
                _text(cond),
                [(column, str(_text(v))) for column, v in (values or {}).items()],
            )
            for kind, action, cond, values in self._clauses
        ]
        return MergePlan(
            str(_text(self._condition)),
            clauses,
            target_alias=target_alias,
            source_alias=source_alias or "source",
        )

    def execute(self) -> dict[str, Any]:
        """Run the MERGE; returns Delta Spark's MERGE metrics in snake_case
        (``num_target_rows_updated``, ``num_target_rows_inserted``,
        ``num_source_rows``, ``num_target_deletion_vectors_added``, ...) and
        ``version``. Nothing is committed when no clause acts on any row."""
        started = _now_ms()
        app_id, version = self._options.get("txn_app_id"), self._options.get("txn_version")
        if (app_id is None) != (version is None):
            raise ValueError(
                "deltadv: txn_app_id and txn_version go together (Delta Spark's txnAppId / "
                f"txnVersion); given txn_app_id={app_id!r}, txn_version={version!r}"
            )
        if app_id is not None and version is not None:
            # An early skip (no join, no files): the commit would skip anyway.
            self._table.update_incremental()
            if self._table.transaction_applied(app_id, version):
                return {"version": None, "skipped": True}
        t_alias = self._target_alias or "target"
        s_alias = _alias_of(self._source)
        plan = self._plan(t_alias, s_alias)
        return _SparkMerge(
            self._spark,
            self._table,
            self._source,
            self._condition,
            self._clauses,
            self._options,
            self._evolve,
            plan,
            (t_alias, s_alias),
            started,
        ).run()


class _SparkMerge:
    """One run of a Spark MERGE: the phases of :meth:`DeltaMergeBuilder.execute`
    and the state they share. The rules come from ``plan``; this only moves
    rows (joins, the change stream, the writers) and counts them per clause."""

    def __init__(
        self,
        spark: SparkSession,
        table: _LocalTable,
        source: DataFrame,
        condition: str | Column,
        clauses: list[_Clause],
        options: dict[str, Any],
        evolve: bool,
        plan: MergePlan,
        aliases: tuple[str, str | None],
        started: int,
    ) -> None:
        from pyspark.sql.pandas.types import from_arrow_schema

        self.plan = plan
        self.t_alias, self.s_alias = aliases
        self.started = started
        self.spark = spark
        self.condition = condition
        self.clauses = clauses
        self.options = options
        self.source_in = source
        self.table = table
        self.table.update_incremental()
        self.fields = list(from_arrow_schema(self.table.schema(), prefer_timestamp_ntz=True).fields)
        self.table_names = {f.name for f in self.fields}
        self.kinds = {c[0] for c in plan.clauses}
        self.new_columns: pa.Schema | None = None
        if evolve and plan.writes_source_columns:
            self._evolve_schema()
        self.by_name = {f.name.lower(): f for f in self.fields}
        self.generated, self.defaults = column_expressions(self.table)

    def run(self) -> dict[str, Any]:
        self._materialize_source()
        self._bind_clauses()
        self._read_target()
        staged, rows, inserts_of = self._join()
        out = self._write(self._changed_rows(rows), staged, inserts_of)
        return self._commit(out)

    def _evolve_schema(self) -> None:
        """Schema evolution: the source's columns the table lacks are written
        (and added to the schema by the commit)."""
        from pyspark.sql.types import StructField

        lower = {f.name.lower() for f in self.fields}
        fresh = [f for f in self.source_in.schema.fields if f.name.lower() not in lower]
        if fresh:
            self.fields += [StructField(f.name, f.dataType, True) for f in fresh]
            self.new_columns = to_arrow_schema(self.source_in.schema)

    def _materialize_source(self) -> None:
        """A small source is broadcast and the table streamed past it (no
        shuffle of the table): matched rows by an inner join (or, with NOT
        MATCHED BY SOURCE, a left join keeping every target row), source rows to
        insert by an anti join of the materialized source against the matched
        ones. Else one outer join, sort-merge on both sides (Spark cannot size
        the table read, a Python source: it must not broadcast it)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType, LongType, StructField, StructType

        size = _estimated_bytes(self.source_in)
        self.fast = (
            size is not None
            and size <= _broadcast_limit(self.spark)
            and not {"not_matched", "not_matched_by_source"} <= self.kinds
        )
        self.local: pa.Table | None = None
        if self.fast:
            # The small source, collected once (one job): its row count, its join
            # keys and its rows, numbered, come from here; as a local relation it
            # is broadcast without another job.
            local = collect_arrow(self.source_in)
            n = local.num_rows
            self.local = local.append_column(_SOURCE, pa.repeat(pa.scalar(True), n)).append_column(
                _SOURCE_ID, pa.array(range(n), pa.int64())
            )
            source = arrow_frame(
                self.spark,
                self.local,
                StructType(
                    [
                        *self.source_in.schema.fields,
                        StructField(_SOURCE, BooleanType(), False),
                        StructField(_SOURCE_ID, LongType(), False),
                    ]
                ),
            )
        else:
            source = self.source_in.withColumn(_SOURCE, F.lit(True))
        self.source = source.alias(self.s_alias) if self.s_alias is not None else source

    def scol(self, name: str) -> Column:
        return self.source[f"`{name}`"]

    def tcol(self, name: str) -> Column:
        return self.target[f"`{name}`"]

    def _bind_clauses(self) -> None:
        """Each clause: its condition and the columns it assigns (resolved by
        the plan: by name for UPDATE SET * / INSERT *, else as given)."""
        from pyspark.sql import functions as F

        self.specs: list[tuple[int, str, str, Column | None, dict[str, Column]]] = []
        names = [f.name for f in self.fields]
        self.texts = [_text(self.condition) or ""]
        for i, (kind, action, cond, values) in enumerate(self.clauses):
            if cond is not None:
                self.texts.append(str(_text(cond)))
            given = list((values or {}).values())
            self.texts += [str(_text(v)) for v in given]
            assigned: dict[str, Column] = {}
            for k, (column, src, _) in enumerate(
                self.plan.assignments(i, names, list(self.source_in.columns))
            ):
                field = self.by_name[column.lower()]
                v = self.scol(src) if src is not None else given[k]
                expr = F.expr(v) if isinstance(v, str) else v
                assigned[column] = expr.cast(field.dataType)
            condition_col = (
                None if cond is None else F.expr(cond) if isinstance(cond, str) else cond
            )
            self.specs.append((i, kind, action, condition_col, assigned))

    def _read_target(self) -> None:
        """The table read on the executors, only the columns the MERGE may use:
        those its expressions name, and those an UPDATE keeps."""
        words = {
            (a or b).lower()
            for a, b in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", " ".join(self.texts))
        }
        needed = {f.name for f in self.fields if f.name.lower() in words}
        for _, _kind, action, _, assigned in self.specs:
            if action in ("update", "update_all"):
                needed |= {f.name for f in self.fields if f.name not in assigned}
        self.read_fields = [
            f for f in self.fields if f.name in needed and f.name in self.table_names
        ]
        self.readable = {f.name for f in self.read_fields}
        self.tasks = self.table.scan_tasks(
            [f.name for f in self.read_fields],
            split_size=split_size(self.spark),
            with_metadata=True,
        )
        self.paths = sorted({t.path for t in self.tasks})
        self.target = _target_rows(self.spark, self.tasks, self.paths, self.read_fields).alias(
            self.t_alias
        )

    def _stage(
        self,
        frame: DataFrame,
        kinds_here: dict[str, Column],
        with_target: bool,
        carry: tuple[Column, ...] = (),
        keep_idle: bool = False,
    ) -> tuple[DataFrame, DataFrame]:
        """``frame`` with the acting clause of each row (rows none acts on
        dropped, unless ``keep_idle``: their clause and change are null), and
        the change rows it gives (with the ``carry`` columns)."""
        from pyspark.sql import functions as F

        clause_expr = None
        change = None
        column_values: dict[str, Column] = {}
        for i, kind, action, cond, assigned in self.specs:
            if kind not in kinds_here:
                continue
            hit = kinds_here[kind] if cond is None else kinds_here[kind] & cond
            clause_expr = F.when(hit, F.lit(i)) if clause_expr is None else clause_expr.when(hit, i)
            what = self.plan.change(i)
            mine = F.col(_CLAUSE) == i
            change = F.when(mine, F.lit(what)) if change is None else change.when(mine, what)
            for f in self.fields:
                if action == "delete":
                    continue
                if f.name in assigned:
                    new = assigned[f.name]
                elif action.startswith("insert") and f.name in self.defaults:
                    new = F.expr(self.defaults[f.name]).cast(f.dataType)
                elif action.startswith("insert"):
                    new = F.lit(None).cast(f.dataType)
                else:
                    continue  # an update keeps the column
                old = column_values.get(f.name)
                column_values[f.name] = F.when(mine, new) if old is None else old.when(mine, new)
        if clause_expr is None or change is None:
            if not keep_idle:
                raise ValueError("a MERGE needs at least one when... clause")
            clause_expr = F.lit(None).cast("int")
            change = F.lit(None).cast("string")
        staged = frame.select("*", clause_expr.alias(_CLAUSE))
        if not keep_idle:
            staged = staged.filter(F.col(_CLAUSE).isNotNull())
        out_cols = []
        for f in self.fields:
            base = (
                self.tcol(f.name)
                if with_target and f.name in self.readable
                else F.lit(None).cast(f.dataType)
            )
            v = column_values.get(f.name)
            out_cols.append((base if v is None else v.otherwise(base)).alias(f.name))
        meta = (
            [self.tcol(_FILE_ID), self.tcol("_row_index")]
            if with_target
            else [F.lit(None).cast("int"), F.lit(None).cast("long")]
        )
        rows = staged.select(
            *out_cols,
            meta[0].alias(_FILE_ID),
            meta[1].alias("_row_index"),
            change.alias("_change"),
            F.col(_CLAUSE),
            *carry,
        )
        if self.generated:
            # Generated columns a clause does not assign follow the new row
            # (Spark evaluates Delta's expression); the writer checks them.
            def value(name: str, dtype: Any) -> Column:
                assigning = [i for i, _, _, _, a in self.specs if name in a]
                recomputed = F.expr(self.generated[name]).cast(dtype)
                if not assigning:
                    return recomputed.alias(name)
                keep = F.col(_CLAUSE).isin(assigning)
                return F.when(keep, F.col(f"`{name}`")).otherwise(recomputed).alias(name)

            rows = rows.select(
                *[
                    value(f.name, f.dataType) if f.name in self.generated else F.col(f"`{f.name}`")
                    for f in self.fields
                ],
                *[c for c in rows.columns if c not in {f.name for f in self.fields}],
            )
        return staged, rows

    def _join(
        self,
    ) -> tuple[DataFrame, DataFrame, Callable[[list[int]], DataFrame] | None]:
        """The target joined with the source as the clauses need: the staged
        pairs, their change rows, and (broadcast joins with inserts) how to make
        the insert rows once the matched source rows are known."""
        from pyspark.sql import functions as F

        kinds = self.kinds
        condition = F.expr(self.condition) if isinstance(self.condition, str) else self.condition
        if self.fast and "not_matched_by_source" not in kinds:
            # Only target rows whose join keys occur in the (small) source can
            # match: the readers drop the others before Spark sees them.
            assert self.local is not None
            probe = self.target.join(F.broadcast(self.source), condition, "inner")
            keys = _key_values(probe, self.local, self.readable)
            if keys:
                self.target = _target_rows(
                    self.spark, self.tasks, self.paths, self.read_fields, keys
                ).alias(self.t_alias)
        # (after the line above: these name the target's columns)
        has_target = self.tcol("_row_index").isNotNull()
        has_source = self.scol(_SOURCE).isNotNull()
        self.group_of = {
            "matched": has_target & has_source,
            "not_matched": ~has_target & has_source,
            "not_matched_by_source": has_target & ~has_source,
        }
        if not self.fast:
            how = {
                (True, True): "full_outer",
                (True, False): "right_outer",
                (False, True): "left_outer",
                (False, False): "inner",
            }[("not_matched" in kinds, "not_matched_by_source" in kinds)]
            joined = self.target.hint("merge").join(self.source, condition, how)
            return (*self._stage(joined, self.group_of, with_target=True), None)
        how = "left_outer" if "not_matched_by_source" in kinds else "inner"
        joined = self.target.join(F.broadcast(self.source), condition, how)
        here = {k: v for k, v in self.group_of.items() if k != "not_matched"}
        # With inserts to come, every matched pair reaches the writers (those
        # no clause acts on too, without a change): they report which source
        # rows matched.
        reports = "not_matched" in kinds
        carry = (self.scol(_SOURCE_ID).alias(_SOURCE_ID),) if reports else ()
        staged, rows = self._stage(joined, here, with_target=True, carry=carry, keep_idle=reports)
        return staged, rows, self._pending_inserts if reports else None

    def _pending_inserts(self, matched: list[int]) -> DataFrame:
        """The insert rows of the source rows no target row matched."""
        from pyspark.sql import functions as F

        ids = self.spark.createDataFrame([(i,) for i in matched], f"{_MATCHED_ID} long")
        unmatched = self.source.join(
            F.broadcast(ids), self.scol(_SOURCE_ID) == ids[_MATCHED_ID], "left_anti"
        )
        return self._stage(unmatched, {"not_matched": F.lit(True)}, with_target=False)[1]

    def _changed_rows(self, rows: DataFrame) -> DataFrame:
        """The change rows as the writers take them: a target row several
        source rows delete once (where the plan allows it), with its file's
        path."""
        from pyspark.sql import functions as F

        if self.plan.deletes_duplicates_once:
            rows = rows.filter(F.col("_row_index").isNull()).unionByName(
                rows.filter(F.col("_row_index").isNotNull()).dropDuplicates(
                    [_FILE_ID, "_row_index"]
                )
            )
        # Rows carry a file number, not the path (10M copies of a path cost
        # more than the join): the paths are joined back on the changed rows.
        path_df = self.spark.createDataFrame(
            list(enumerate(self.paths)), f"{_FILE_ID} int, _file_path string"
        )
        return rows.join(F.broadcast(path_df), _FILE_ID, "left").drop(_FILE_ID)

    def _write(
        self,
        rows: DataFrame,
        staged: DataFrame,
        inserts_of: Callable[[list[int]], DataFrame] | None,
    ) -> list[Any]:
        """The change rows written by the executors (new data files, one DV
        file a task), then the inserts of unmatched source rows; one row per
        writer with its prepared changes, counts per clause and time."""
        from pyspark.sql import functions as F

        options = self.options
        change_task = self.table.change_task(
            self.paths,
            inline_threshold=options["inline_threshold"],
            dv_file_target_size=options["dv_file_target_size"],
            target_file_size=options["target_file_size"],
            new_columns=self.new_columns,
            time_zone=session_time_zone(self.spark),
        )
        parts = max(1, default_parallelism(self.spark) * 2)
        key = F.coalesce(
            F.col("_file_path"),
            F.hash(*[F.col(f"`{f.name}`") for f in self.fields]).cast("string"),
        )
        self.num_source = self.local.num_rows if self.local is not None else self.source_in.count()
        self.source_ms = _now_ms() - self.started
        job_started = _now_ms()
        # The rows of one data file all come from the task that read it (the
        # broadcast join keeps the table's partitions): unless a file was split,
        # coalescing gives each writer whole files, without a shuffle.
        whole_files = self.fast and all(t.row_groups is None for t in self.tasks)
        grouped = rows.coalesce(parts) if whole_files else rows.repartition(parts, key)
        # The stage has at most `parts` tasks (0 .. parts-1), their identity
        # values interleaved as Delta Spark's over `parts`.
        writer = _counting_writer(change_task, parts, (parts, None))
        try:
            out: list[Any] = grouped.mapInArrow(
                writer, "prepared string, counts string, ms long, matched string"
            ).collect()
            if inserts_of is not None:
                matched = sorted({i for r in out for i in json.loads(r["matched"])})
                pending = collect_arrow(inserts_of(matched).drop(_FILE_ID))
                # Small (at most the source): written here, on the driver. When
                # no task handed out identity values, the driver is their one
                # writer: it continues from the mark as a single-partition
                # write of Delta Spark does; else a slot no task has.
                generated = any(
                    json.loads(r["prepared"]).get("identity_high_water_marks")
                    for r in out
                    if r["prepared"] is not None
                )
                alone = (parts, None) if generated else (0, 1)
                driver = _counting_writer(change_task, parts, alone)
                for b in driver(iter(pending.to_batches())):
                    out.extend(b.to_pylist())
        except Exception as e:
            if DUPLICATE_ERROR in str(e):
                acting = staged.filter(F.col(_CLAUSE).isNotNull())
                raise self._duplicate_error(acting) from None
            raise
        self.job_ms = _now_ms() - job_started
        return out

    def _commit(self, out: list[Any]) -> dict[str, Any]:
        """One MERGE commit of every writer's changes, with the plan's
        parameters, metrics and read set."""
        # The writing tasks run in parallel: the longest is the write phase's
        # wall time (an upper bound: it includes pulling the shuffled rows).
        rewrite_ms = min(self.job_ms, max((r["ms"] for r in out), default=0))
        counts = [0] * len(self.plan.clauses)
        for r in out:
            for k, n in json.loads(r["counts"]).items():
                counts[int(k)] += n
        extra: dict[str, Any] = self.plan.metrics(
            counts,
            self.num_source,
            materialize_source_ms=self.source_ms,
            scan_ms=self.job_ms - rewrite_ms,
            rewrite_ms=rewrite_ms,
        )
        extra["executionTimeMs"] = _now_ms() - self.started
        return self.table.commit_changes(
            "MERGE",
            [r["prepared"] for r in out if r["prepared"] is not None],
            parameters=self.plan.operation_parameters(),
            extra_metrics=extra,
            # The plan says what the result depends on: every file (inserts,
            # NOT MATCHED BY SOURCE) or only the files read.
            read_files=None if self.plan.reads_whole_table else self.paths,
            inline_threshold=self.options["inline_threshold"],
            new_columns=self.new_columns,
            time_zone=session_time_zone(self.spark),
            txn_app_id=self.options.get("txn_app_id"),
            txn_version=self.options.get("txn_version"),
            **self._source_keys(),
        )

    def _source_keys(self) -> dict[str, Any]:
        """The commit's arguments for checking files a concurrent commit added
        (when the plan checks them, and the condition is SQL text): the source
        columns the condition names, every row while Spark's count of them says
        they fit the Rust core's budget, else only their schema."""
        if not self.plan.checks_added_rows or not isinstance(self.condition, str):
            return {}
        words = {
            (a or b).lower()
            for a, b in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", self.condition)
        }
        columns = [c for c in self.source_in.columns if c.lower() in words]
        if not columns:
            return {}
        if self.local is not None:  # the broadcast source, collected already
            keys, complete = self.local.select(columns), True
        else:
            frame = self.source_in.select(*[f"`{c}`" for c in columns])
            # A lower bound of what the Rust core keeps a row (see SOURCE_KEYS_LIMIT).
            complete = self.num_source * (16 + 9 * len(columns)) <= MergePlan.SOURCE_KEYS_LIMIT
            keys = collect_arrow(frame) if complete else to_arrow_schema(frame.schema).empty_table()
        return {"merge_plan": self.plan, "merge_keys": keys, "merge_keys_complete": complete}

    def _duplicate_error(self, staged: DataFrame) -> ValueError:
        """The duplicate-match error, naming a target row (its values) that
        several source rows would change."""
        from pyspark.sql import functions as F

        target, matched = self.target, self.group_of["matched"]
        dup = (
            staged.filter(matched)
            .groupBy(target[_FILE_ID], target["_row_index"])
            .count()
            .filter(F.col("count") > 1)
            .limit(1)
            .collect()
        )
        detail = None
        if dup:
            file_id, index = dup[0][0], dup[0][1]
            path = self.paths[file_id]
            row = (
                staged.filter(matched)
                .filter((target[_FILE_ID] == file_id) & (target["_row_index"] == index))
                .select(target["*"])
                .drop(_FILE_ID, "_row_index")
                .first()
            )
            if row is not None:
                detail = f"{row.asDict()}; row {index} of {path}"
        error = self.plan.duplicate_error(detail)
        assert isinstance(error, ValueError)
        return error


def _estimated_bytes(df: DataFrame) -> int | None:
    """Spark's size estimate of ``df``: the ``sizeInBytes`` of its optimized plan,
    read from ``explain(mode="cost")`` (classic and Spark Connect alike; shown in
    units of 1024 with one decimal, so within 0.05 of a unit), or None."""
    text = explain_text(df, "cost")
    optimized = text.split("== Optimized Logical Plan ==", 1)[-1]
    found = re.search(r"Statistics\(sizeInBytes=([0-9.]+(?:E[0-9]+)?) ([KMGTPE]i)?B", optimized)
    if found is None:
        return None
    power = " KMGTPE".index(found.group(2)[0]) if found.group(2) else 0
    return int(float(found.group(1)) * 1024**power)


def _broadcast_limit(spark: Any) -> int:
    """``spark.sql.autoBroadcastJoinThreshold`` in bytes (10 MiB by default)."""
    return broadcast_threshold(spark)


def _now_ms() -> int:
    import time

    return int(time.monotonic() * 1000)
