"""``spark.readStream.format("deltadv").load(path)``: the streaming source, Spark 4's
Python ``DataSourceStreamReader`` over :class:`deltadv.streaming.StreamSource`.

Spark asks the reader, on the driver, where each micro-batch ends
(``latestOffset``, within the read limit) and for its partitions; the partitions
are the batch's scan tasks (JSON text) packed as batch reads pack them, and the
executors read them with deletion vectors applied, as a batch read does. Offsets
are Delta Spark's ``DeltaSourceOffset`` JSON, kept in the query's checkpoint, so a
restarted query resumes after the last committed micro-batch. What a stream reads
and which commits stop it is Delta Spark's ``DeltaSource``'s (see
:mod:`deltadv.streaming`).

Options (case-insensitive):

============================  =========================================================
``path``                      the table URI (``load(path)``)
``startingVersion``           read only the changes from this version on (no initial
                              snapshot); ``latest``: only commits after the start
``startingTimestamp``         the same from the first commit at or after this ISO-8601
                              time (UTC without an offset)
``maxFilesPerTrigger``        files a micro-batch reads at most (default 1000)
``maxBytesPerTrigger``        bytes a micro-batch reads about at most (``10m``, ``1g``,
                              or a number of bytes); the file that reaches the limit
                              is read whole
``ignoreDeletes``             ``true``: commits that only remove files are passed over
``skipChangeCommits``         ``true``: commits that remove files (DELETE, UPDATE,
                              MERGE, ...) are skipped whole
``ignoreChanges``             ``true`` (deprecated in Delta Spark): the files such
                              commits re-add are read again, unchanged rows included
``readChangeFeed``            ``true``: stream the Change Data Feed (below); the three
                              options above do not apply to it
``splitSize``, ``storage.*``, as for batch reads
``AWS_*`` ...
============================  =========================================================

``Trigger.AvailableNow`` reads what the table holds when the query starts, in
batches within the limits, then stops. Without ``ignoreDeletes`` or
``skipChangeCommits`` a commit that deletes or rewrites rows fails the query with
Delta Spark's message, naming the version; so does a schema change after the
stream's schema (the table's when the query was loaded): restart the query. A
query that starts before that version reads older data with that schema, but
fails across a column renamed or dropped under column mapping (as Delta Spark
without ``schemaTrackingLocation``). The same works on Spark Connect.

``readChangeFeed=true`` streams the Change Data Feed, as Delta Spark's
``DeltaSourceCDCSupport``: the initial snapshot's rows as ``insert`` (its version and
commit time as ``_commit_version``/``_commit_timestamp``; none with
``startingVersion``/``startingTimestamp``), then each commit's changed rows
(``insert``, ``delete``, ``update_preimage``, ``update_postimage``; rows a deletion
vector newly deletes as ``delete``), the table's columns then ``_change_type``,
``_commit_version``, ``_commit_timestamp``. DELETE, UPDATE and MERGE do not stop it;
OPTIMIZE and PURGE add nothing; a schema change does stop it. Offsets index a
commit's change entries (its ``cdc`` files, else its adds and removes); a commit's
``cdc`` files, or its adds and removes when one carries a deletion vector, are
admitted into a micro-batch all together (beyond the limits when first), so one
change never spans two batches.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from deltadv.spark._tasks import pack
from deltadv.streaming import DEFAULT_MAX_FILES_PER_TRIGGER, StreamSource

__all__ = ["STREAM_KEYS", "DeltaDVStreamReader", "batch_options"]

STARTING_VERSION_KEY = "startingversion"
STARTING_TIMESTAMP_KEY = "startingtimestamp"
MAX_FILES_KEY = "maxfilespertrigger"
MAX_BYTES_KEY = "maxbytespertrigger"
FLAG_KEYS = {
    "ignoredeletes": "ignore_deletes",
    "ignorechanges": "ignore_changes",
    "skipchangecommits": "skip_change_commits",
}
#: Options only a streaming read takes.
STREAM_KEYS = frozenset({MAX_FILES_KEY, MAX_BYTES_KEY, *FLAG_KEYS})
_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def batch_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` without the stream-only keys (and, when they ask for the rows,
    not the change feed, without ``startingVersion``/``startingTimestamp``): what
    the batch code reads the table's schema with."""
    out = {k: v for k, v in options.items() if k.lower() not in STREAM_KEYS}
    if out.get("readchangefeed", "false").strip().lower() != "true":
        out.pop(STARTING_VERSION_KEY, None)
        out.pop(STARTING_TIMESTAMP_KEY, None)
    return out


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"deltadv: {key} must be true or false, not {value!r}")
    return value == "true"


def _count(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    text = options[key].strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"deltadv: {key} must be a positive integer, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"deltadv: {key} must be a positive integer, not {value}")
    return value


def _bytes(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    text = options[key].strip().lower()
    m = re.fullmatch(r"(\d+)\s*([kmgt]?)i?b?", text)
    if m is None or int(m.group(1)) <= 0:
        raise ValueError(
            f"deltadv: {key} must be a positive size (bytes, or with a unit: 10k, 64m, 1g), "
            f"not {options[key]!r}"
        )
    return int(m.group(1)) * _BYTE_UNITS[m.group(2)]


def _source_arguments(options: Mapping[str, str]) -> dict[str, Any]:
    """StreamSource's keyword arguments from the stream's options."""
    args: dict[str, Any] = {name: _flag(options, key) for key, name in FLAG_KEYS.items()}
    args["read_change_feed"] = _flag(options, "readchangefeed")
    if STARTING_VERSION_KEY in options and STARTING_TIMESTAMP_KEY in options:
        raise ValueError("deltadv: give startingVersion or startingTimestamp, not both")
    if STARTING_VERSION_KEY in options:
        text = options[STARTING_VERSION_KEY].strip()
        if text.lower() == "latest":
            args["starting_version"] = "latest"
        else:
            try:
                args["starting_version"] = int(text)
            except ValueError:
                raise ValueError(
                    f'deltadv: startingVersion must be a version or "latest", not {text!r}'
                ) from None
    if STARTING_TIMESTAMP_KEY in options:
        args["starting_timestamp"] = options[STARTING_TIMESTAMP_KEY].strip()
    args["max_files_per_trigger"] = _count(options, MAX_FILES_KEY)
    args["max_bytes_per_trigger"] = _bytes(options, MAX_BYTES_KEY)
    return args


class DeltaDVStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: offsets and micro-batches planned by
    :class:`deltadv.streaming.StreamSource` on the driver; rows read on the
    executors from the batch's scan tasks."""

    def __init__(
        self,
        options: dict[str, str],
        schema: StructType,
        rows: DataSourceReader,
        *,
        table_uri: str,
        storage_options: dict[str, str],
        split_size: int,
        parallelism: int | None,
        version: int | None,
    ) -> None:
        self.options = options
        self.schema = schema
        self.rows = rows  # the batch reader whose read() reads a partition's tasks
        self.table_uri = table_uri
        self.storage = storage_options
        self.split = split_size
        self.parallelism = parallelism
        self.version = version  # the version load() read the schema at
        self.arguments = _source_arguments(options)
        self._source: StreamSource | None = None
        self._available_now = False
        self._bound: dict[str, Any] | None = None
        self._bound_set = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_source"] = None  # the native table stays on the driver
        return state

    def _stream(self) -> StreamSource:
        if self._source is None:
            self._source = StreamSource(
                self.table_uri,
                storage_options=self.storage or None,
                version=self.version,
                **self.arguments,
            )
        return self._source

    def initialOffset(self) -> dict[str, Any]:
        return self._stream().initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        files = self.arguments["max_files_per_trigger"]
        size = self.arguments["max_bytes_per_trigger"]
        if files is None and size is not None:
            return ReadMaxBytes(size)
        return ReadMaxFiles(files or DEFAULT_MAX_FILES_PER_TRIGGER)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        stream = self._stream()
        if self._available_now and not self._bound_set:
            # What the table holds now is all this run reads (Delta Spark's
            # lastOffsetForTriggerAvailableNow).
            self._bound = stream.latest_offset(start, limited=False)
            self._bound_set = True
        limited = not isinstance(limit, ReadAllAvailable)
        return stream.latest_offset(start, limited=limited, bound=self._bound)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        tasks = self._stream().tasks(start, end)
        if not tasks:
            return []
        # packed as batch reads pack theirs
        groups = pack([t.size for t in tasks], self.split, self.parallelism or len(tasks))
        return [InputPartition([tasks[i].json for i in group]) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.rows.read(partition)  # type: ignore[misc]

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        self._source = None
