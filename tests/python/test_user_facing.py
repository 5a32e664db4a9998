"""What a new user meets first (issue 10): exceptions caught by kind, names that
mean what they mean in deltalake, reprs in Python syntax without secrets, storage
options checked everywhere, and clear words for a data file that is gone.

Expected values come from the data each test writes, never from deltadv's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltadv
import deltadv.exceptions
from deltadv import DeleteTask, DeltaTable
from deltadv.write import write_table

N = 1000


def _table(tmp_path: Path, name: str = "t") -> Path:
    root = tmp_path / name
    data = pa.table({"id": pa.array(range(N), pa.int64()), "part": [i % 2 for i in range(N)]})
    write_table(str(root), data, partition_by=["part"])
    return root


# --- exceptions by kind -----------------------------------------------------------------


def test_exception_classes_are_exported_and_related() -> None:
    names = [
        "TableNotFoundError",
        "TableAlreadyExistsError",
        "VersionNotFoundError",
        "DeltaProtocolError",
        "CommitConflictError",
        "CorruptDeletionVectorError",
        "CorruptLogError",
        "CorruptDataFileError",
        "UnsupportedPredicateError",
        "UnsupportedSparkError",
        "StorageError",
        "InternalError",
    ]
    for name in names:
        cls = getattr(deltadv, name)
        assert cls is getattr(deltadv.exceptions, name)
        assert issubclass(cls, deltadv.DeltaDVError), name
        assert name in deltadv.__all__ and name in deltadv.exceptions.__all__
    # builtins where they fit, so existing handlers keep working
    assert issubclass(deltadv.TableNotFoundError, FileNotFoundError)
    assert issubclass(deltadv.TableAlreadyExistsError, FileExistsError)
    assert issubclass(deltadv.VersionNotFoundError, ValueError)
    assert issubclass(deltadv.UnsupportedPredicateError, ValueError)
    assert issubclass(deltadv.StorageError, OSError)
    assert issubclass(deltadv.UnsupportedSparkError, ImportError)
    assert not issubclass(deltadv.DeltaProtocolError, ValueError)
    # a bug of ours is never mistaken for the caller's bad input
    assert not issubclass(deltadv.InternalError, ValueError)


def test_each_failure_raises_its_class(tmp_path: Path) -> None:
    root = _table(tmp_path)
    t = DeltaTable(str(root))
    with pytest.raises(deltadv.VersionNotFoundError):
        DeltaTable(str(root), version=5)
    with pytest.raises(deltadv.UnsupportedPredicateError, match="subset"):
        t.to_pyarrow_table(filter="id LIKE '1%'")
    # a column that is not there is the caller's mistake, not an unsupported predicate
    with pytest.raises(ValueError, match="not in the table") as info:
        t.to_pyarrow_table(filter="idd = 1")
    assert not isinstance(info.value, deltadv.UnsupportedPredicateError)
    with pytest.raises(deltadv.TableAlreadyExistsError):
        write_table(str(root), pa.table({"id": [1]}))
    # a log line whose action does not parse is a corrupt log, naming the file
    log = root / "_delta_log" / f"{1:020}.json"
    log.write_text(json.dumps({"add": {"path": 7}}) + "\n")
    with pytest.raises(deltadv.CorruptLogError, match=r"00000000000000000001\.json.*line 1"):
        DeltaTable(str(root))
    log.write_text(json.dumps({"protocol": {"minReaderVersion": 9, "minWriterVersion": 9}}) + "\n")
    with pytest.raises(deltadv.DeltaProtocolError, match="reader version 9"):
        DeltaTable(str(root))


def test_messages_have_no_redundant_prefix(tmp_path: Path) -> None:
    root = _table(tmp_path)
    path = DeltaTable(str(root)).files()[0]
    with pytest.raises(ValueError, match="row") as info:
        DeltaTable(str(root)).delete_rows({path: [N * 10]})
    assert not str(info.value).startswith("invalid argument")
    with pytest.raises(ValueError) as info:
        deltadv.DeletionVector([-1])
    assert not str(info.value).startswith("invalid argument")


# --- storage options ----------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["local", "file", "memory://user-facing/t"])
def test_unknown_storage_options_are_refused_everywhere(tmp_path: Path, uri: str) -> None:
    root = _table(tmp_path)
    target = {"local": str(root), "file": root.as_uri()}.get(uri, uri)
    with pytest.raises(ValueError, match='unknown storage option "AWS_REGOIN"'):
        DeltaTable(target, storage_options={"AWS_REGOIN": "eu-west-1"})
    # deltalake's own behaviour keys stay accepted, as for S3
    if uri != "memory://user-facing/t":
        assert DeltaTable(target, storage_options={"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}).count()


# --- reprs --------------------------------------------------------------------------------


def test_descriptor_repr_is_python_and_evaluates_back() -> None:
    desc = deltadv.DeletionVectorDescriptor.from_json(
        {
            "storageType": "u",
            "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
            "offset": 1,
            "sizeInBytes": 36,
            "cardinality": 2,
        }
    )
    text = repr(desc)
    assert "Some(" not in text and "None" not in text
    assert eval(text, {"DeletionVectorDescriptor": deltadv.DeletionVectorDescriptor}) == desc
    inline = deltadv.DeletionVector([3, 4]).to_inline_descriptor()
    assert "offset=None" in repr(inline)
    assert eval(repr(inline), {"DeletionVectorDescriptor": deltadv.DeletionVectorDescriptor}) == (
        inline
    )


def test_scan_task_read_is_a_stream_and_repr_names_the_file(tmp_path: Path) -> None:
    root = _table(tmp_path)
    tasks = DeltaTable(str(root)).scan_tasks()
    reader = tasks[0].read()
    assert isinstance(reader, pa.RecordBatchReader)
    assert f"path={json.loads(tasks[0].json)['path']!r}" in repr(tasks[0])


# --- a data file that is gone ----------------------------------------------------------------


def test_a_missing_data_file_is_named_as_gone(tmp_path: Path) -> None:
    root = _table(tmp_path)
    t = DeltaTable(str(root))
    gone = t.files()[0]
    (root / gone).unlink()
    with pytest.raises(FileNotFoundError) as info:
        t.to_pyarrow_table()
    message = str(info.value)
    assert gone in message and "does not exist" in message and "vacuumed" in message
    assert "parquet/arrow error" not in message


# --- names as in deltalake ------------------------------------------------------------------


def test_files_and_add_actions_as_in_deltalake(tmp_path: Path) -> None:
    import deltalake

    root = _table(tmp_path)
    ours = DeltaTable(str(root))
    theirs = deltalake.DeltaTable(str(root))
    files = ours.files()
    assert isinstance(files, list) and all(isinstance(p, str) for p in files)
    on_disk = {str(p.relative_to(root)) for p in root.rglob("*.parquet")}
    assert set(files) == on_disk
    actions = ours.get_add_actions()
    their_actions = pa.table(theirs.get_add_actions(flatten=False))
    # the columns both have carry the same names and values
    for column in ["path", "size_bytes", "modification_time", "num_records"]:
        ours_by_path = dict(
            zip(actions["path"].to_pylist(), actions[column].to_pylist(), strict=True)
        )
        theirs_by_path = dict(
            zip(their_actions["path"].to_pylist(), their_actions[column].to_pylist(), strict=True)
        )
        assert ours_by_path == theirs_by_path, column
    assert actions["partition"].type == their_actions["partition"].type
    flat = ours.get_add_actions(flatten=True)
    assert "partition.part" in flat.column_names
    # to_pyarrow_table is the name; to_pyarrow stays as an alias
    assert ours.to_pyarrow_table(["id"]).equals(ours.to_pyarrow(["id"]))
    assert sorted(ours.to_pyarrow_table(["id"])["id"].to_pylist()) == list(range(N))


def test_count_without_stats_reads_footers(tmp_path: Path) -> None:
    root = _table(tmp_path)
    t = DeltaTable(str(root))
    t.delete("id < 10 AND part = 0")  # ids 0, 2, 4, 6, 8: only the part=0 file
    log = root / "_delta_log" / f"{0:020}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a:
            a["add"].pop("stats", None)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    fresh = DeltaTable(str(root))
    # the DELETE's add carries stats for the part=0 file; the part=1 file has none
    # left: its footer is read
    assert fresh.get_add_actions()["num_records"].null_count == 1
    assert fresh.count() == N - 5


def test_spark_history_is_a_dataframe_like_delta_sparks(delta_spark: Any, tmp_path: Path) -> None:
    from deltadv import spark as dspark

    spark = delta_spark
    path = str(tmp_path / "h")
    spark.range(0, 100).write.format("delta").option("delta.enableDeletionVectors", "true").save(
        path
    )
    table = dspark.DeltaTable.forPath(spark, path)
    table.delete("id % 10 = 0")
    ours = table.history()
    theirs = spark.sql(f"DESCRIBE HISTORY delta.`{path}`")
    assert ours.schema == theirs.schema
    key = ["version", "operation", "readVersion", "isBlindAppend"]
    assert [r.asDict() for r in ours.select(key).collect()] == [
        r.asDict() for r in theirs.select(key).orderBy("version", ascending=False).collect()
    ]
    ours_rows = {r["version"]: r for r in ours.collect()}
    theirs_rows = {r["version"]: r for r in theirs.collect()}
    for v in ours_rows:
        assert ours_rows[v]["operationMetrics"] == theirs_rows[v]["operationMetrics"]
        assert ours_rows[v]["timestamp"] == theirs_rows[v]["timestamp"]
    assert int(ours_rows[1]["operationMetrics"]["numDeletedRows"]) == 10
    assert table.history(limit=1).count() == 1


def test_one_engine_info_for_every_commit(tmp_path: Path) -> None:
    root = _table(tmp_path)
    DeltaTable(str(root)).delete("id = 3")
    infos = []
    for version in (0, 1):
        text = (root / "_delta_log" / f"{version:020}.json").read_text()
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        infos.append(next(a["commitInfo"] for a in actions if "commitInfo" in a))
    assert [i["engineInfo"] for i in infos] == [f"deltadv/{deltadv.__version__}"] * 2


def test_spark_read_surfaces_errors_other_than_unsupported_predicates(
    spark: Any, tmp_path: Path
) -> None:
    from deltadv import spark as dspark

    root = _table(tmp_path)
    # outside the subset: Spark evaluates it, deltadv only skips pruning
    df = dspark.read(spark, str(root), filter="CAST(id AS STRING) LIKE '99%'")
    assert sorted(r["id"] for r in df.collect()) == [99, *range(990, 1000)]
    # input past deltadv's limits is refused, not handed on to Spark's parser
    deep = "NOT " * 5000 + "id = 1"
    with pytest.raises(ValueError, match="nested deeper") as info:
        dspark.read(spark, str(root), filter=deep)
    assert not isinstance(info.value, deltadv.UnsupportedPredicateError)


def test_spark_glue_has_no_import_circle() -> None:
    """The data source and the rest of deltadv.spark share helpers from a third
    module (``deltadv.spark._tasks``): importing deltadv.spark does not import the
    data source (PySpark's data source API is loaded only by ``register``), and
    the data source imports alone, by its new and its old path. (Import cycles
    anywhere in deltadv: test_layering.)"""
    import subprocess
    import sys

    for first, other in [
        ("deltadv.spark", "deltadv.spark.datasource"),
        ("deltadv.spark", "deltadv.datasource"),
    ]:
        code = f"import sys, {first}; assert {other!r} not in sys.modules, sorted(sys.modules)"
        subprocess.run([sys.executable, "-c", code], check=True)
    for alone in ("deltadv.spark.datasource", "deltadv.datasource"):
        subprocess.run([sys.executable, "-c", f"import {alone}"], check=True)


def test_delete_task_prepares_elsewhere_and_commits_once(tmp_path: Path) -> None:
    """The public two-step DELETE deltadv.spark runs on executors: DeleteTask is
    picklable without showing credentials, refuses files it was not made for, and
    the driver's commit_delete commits every prepared file as one DELETE."""
    import pickle

    path = _table(tmp_path)
    t = DeltaTable(str(path))
    files = t.files()
    assert len(files) >= 1
    with pytest.raises(ValueError, match="not a live data file"):
        t.delete_task(["nope.parquet"])
    task = t.delete_task(files, inline_threshold=0)
    secret = DeleteTask(str(path), task.adds, {"AWS_SECRET_ACCESS_KEY": "s3cr3t"})
    assert "s3cr3t" not in repr(secret) and "<hidden>" in repr(secret)
    again = pickle.loads(pickle.dumps(task))
    with pytest.raises(ValueError, match="not one of this delete task's files"):
        again.prepare({"other.parquet": [0]})
    before = t.count()
    prepared = again.prepare({files[0]: [0, 2]})
    assert len(prepared) == 1
    m = t.commit_delete(prepared, predicate="id IN (0, 2)")
    assert m["num_deleted_rows"] == 2 and m["version"] == t.version()
    assert t.count() == before - 2
    info = t.history(1)[0]
    assert info["operation"] == "DELETE"
    assert info["operationParameters"]["predicate"] == '["id IN (0, 2)"]'
