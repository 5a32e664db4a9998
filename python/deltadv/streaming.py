"""Streaming reads of a Delta table, as Delta Spark's streaming source plans them.

A :class:`StreamSource` is the table as a stream: first the rows of the snapshot
it starts at (unless it starts at a version), then, commit by commit, the rows of
the files each commit adds with ``dataChange``, deletion vectors applied. It plans
*micro-batches*: :meth:`StreamSource.latest_offset` says where the next batch ends
(within ``max_files_per_trigger``/``max_bytes_per_trigger``) and
:meth:`StreamSource.tasks` gives the scan tasks (:class:`deltadv.ScanTask`) that
read a batch's rows. Offsets are plain dicts, Delta Spark's ``DeltaSourceOffset``
(``sourceVersion``, ``reservoirId``, ``reservoirVersion``, ``index``,
``isStartingVersion``), so they can be stored as JSON and handed back after a
restart. Every rule (ordering, admission, which commits stop the stream) is the
Rust core's (``deltadv``'s ``log::stream``); this module only moves arguments.

A commit that deletes or rewrites rows (a ``remove`` with ``dataChange``; a
DELETE, UPDATE or MERGE writing deletion vectors re-adds the file it changed)
stops the stream with :class:`deltadv.exceptions.StreamSourceChangedError`, as
Delta Spark, unless ``ignore_deletes`` (commits that only remove files),
``skip_change_commits`` (such commits are skipped whole) or ``ignore_changes``
(deprecated in Delta Spark: the re-added files are read again, rows and all).
So does a later schema change, and, for a stream that starts before the
version its schema was read at, a column renamed or dropped (column mapping)
or a schema the data at the start cannot be read with. Maintenance commits (``dataChange`` false:
OPTIMIZE, PURGE) add nothing to the stream.

With ``read_change_feed`` the stream is the table's Change Data Feed, as Delta
Spark's ``readChangeFeed`` stream: the snapshot's rows as ``insert`` rows (with
``_commit_version`` the snapshot's version), then each commit's changed rows
(``insert``, ``delete``, ``update_preimage``, ``update_postimage``; a deletion
vector's newly deleted rows as ``delete``), with ``_change_type``,
``_commit_version`` and ``_commit_timestamp`` after the table's columns. No commit
stops it for changing rows (the change options do not apply); a schema change
does. A commit's change files, or its files when one has a deletion vector, go
into one micro-batch whole (admitted beyond the limits when first in a batch).

``spark.readStream.format("deltadv")`` (:mod:`deltadv.spark.datasource`) is this
class run by Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from deltadv.table import DeltaTable, ScanTask, _millis

__all__ = ["DEFAULT_MAX_FILES_PER_TRIGGER", "StreamSource"]

#: Files a micro-batch reads at most when no limit is given (as Delta Spark).
DEFAULT_MAX_FILES_PER_TRIGGER = 1000

Offset = dict[str, Any]


def _positive(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, not {value}")
    return value


class StreamSource:
    """A Delta table read as a stream (see the module docs).

    The table is loaded once, at ``version`` (default: the latest): that
    version's schema is the stream's, and a stream that starts fresh begins with
    that version's snapshot. ``starting_version`` (an int, or ``"latest"`` for only commits
    after now) or ``starting_timestamp`` (the first commit at or after it) read
    only the changes from there. ``read_change_feed`` streams the Change Data Feed
    (see the module docs).
    """

    def __init__(
        self,
        table_uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        version: int | None = None,
        starting_version: int | str | None = None,
        starting_timestamp: datetime | str | None = None,
        max_files_per_trigger: int | None = None,
        max_bytes_per_trigger: int | None = None,
        ignore_deletes: bool = False,
        ignore_changes: bool = False,
        skip_change_commits: bool = False,
        read_change_feed: bool = False,
    ) -> None:
        self.table = DeltaTable(
            table_uri,
            version=version,
            storage_options=None if storage_options is None else dict(storage_options),
        )
        if starting_version is not None and starting_timestamp is not None:
            raise ValueError("give starting_version or starting_timestamp, not both")
        latest = self.table.version()
        start: int | None
        if starting_version == "latest":
            start = latest + 1
        elif starting_version is not None:
            if isinstance(starting_version, bool) or not isinstance(starting_version, int):
                raise TypeError(
                    f'starting_version must be an int or "latest", not {starting_version!r}'
                )
            if not 0 <= starting_version <= latest:
                from deltadv.exceptions import VersionNotFoundError

                raise VersionNotFoundError(
                    f"cannot start the stream at version {starting_version}: the table's "
                    f"versions are 0 to {latest}"
                )
            start = starting_version
        elif starting_timestamp is not None:
            start = self.table._raw.stream_starting_version(_millis(starting_timestamp))
        else:
            start = None
        self.starting_version = start
        self.max_files = _positive("max_files_per_trigger", max_files_per_trigger)
        self.max_bytes = _positive("max_bytes_per_trigger", max_bytes_per_trigger)
        self.policy = {
            "ignore_deletes": bool(ignore_deletes),
            "ignore_changes": bool(ignore_changes),
            "skip_change_commits": bool(skip_change_commits),
        }
        self.read_change_feed = bool(read_change_feed)
        # Whether the metadata where the stream starts was checked against its
        # schema (once, as Delta Spark: see log::stream::check_start).
        self._start_checked = False

    def initial_offset(self) -> Offset:
        """The offset of a stream that has read nothing yet."""
        return self.table._raw.stream_initial_offset()

    def _scan(
        self, start: Offset, bound: Offset | None, limited: bool, batch: bool = False
    ) -> tuple[Offset, list[tuple[str, int]]]:
        end, tasks = self.table._raw.stream_scan(
            json.dumps(start),
            None if bound is None else json.dumps(bound),
            limited,
            self.max_files,
            self.max_bytes,
            self.starting_version,
            batch=batch,
            read_change_feed=self.read_change_feed,
            check_start=not self._start_checked,
            **self.policy,
        )
        if end != start:
            self._start_checked = True
        return end, tasks

    def latest_offset(
        self, start: Offset, *, limited: bool = True, bound: Offset | None = None
    ) -> Offset:
        """Where the batch after ``start`` ends: within the admission limits when
        ``limited`` (``max_files_per_trigger``, default 1000 files, and
        ``max_bytes_per_trigger``), and not past ``bound`` when given (the end
        of an AvailableNow run). ``start`` itself when there is nothing new.
        Raises :class:`~deltadv.exceptions.StreamSourceChangedError` when the
        scan reaches a commit the stream may not read past."""
        return self._scan(start, bound, limited)[0]

    def tasks(self, start: Offset, end: Offset) -> list[ScanTask]:
        """The scan tasks reading the rows of the batch (``start``, ``end``]: one
        per file, deletion vectors applied, in stream order (with
        ``read_change_feed``, one per changed file, reading its changed rows)."""
        if start == end:
            return []
        _, tasks = self._scan(start, end, False, batch=True)
        return self.table._tasks(tasks)

    def schema(self) -> Any:
        """The stream's schema (the table's, as Arrow; with ``read_change_feed``,
        then ``_change_type``, ``_commit_version`` and ``_commit_timestamp``)."""
        if self.read_change_feed:
            return self.table.change_feed_schema()
        return self.table.schema()
