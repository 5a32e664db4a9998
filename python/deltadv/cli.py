"""Command line: ``deltadv <command>`` (or ``python -m deltadv <command>``).

``deltadv --version`` prints the version. Table commands (``URI`` is a path or an
``s3://``, ``az://``, ``gs://`` URI; ``--storage-option KEY=VALUE``, repeatable,
passes storage settings; ``--json`` prints JSON instead of a table):

  info URI                 version, protocol, features, files, rows, deleted rows, DVs
  files URI                the live files, with their rows and deleted rows
  history URI [--limit N]  the commits, newest first
  dvs URI [--plot FILE]    deleted-row ratio per file and per partition; a PNG with --plot
  purge URI                REORG ... APPLY (PURGE): rewrite files that have a DV
  optimize URI             bin-pack small files, rewrite files with many deleted rows
  vacuum URI [--apply]     list (default: dry run) or delete files no version reads
  restore URI TARGET       restore a version (number) or a timestamp (ISO-8601)
  generate URI             write the symlink_format_manifest

Long commands show a progress bar on a terminal (not when piped). Other commands:
  read-dv ROOT JSON     print the row indexes of a ``deletionVector`` descriptor
  z85-decode TEXT SIZE  print the hex bytes of Delta-style Z85
  demo                  run the demo
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import deltadv
from deltadv.table import MAX_DELETED_ROWS_RATIO, DeltaTable

#: Exit code of a command that failed on its input or the table.
FAILED = 1


def _storage_options(pairs: Sequence[str]) -> dict[str, str] | None:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option takes KEY=VALUE, not {pair!r}")
        options[key] = value
    return options or None


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


@contextmanager
def _progress(what: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a bar on stderr when it is a
    terminal; a no-op otherwise."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = _console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(
        f"[bold]{what}[/]",
        BarColumn(),
        MofNCompleteColumn(),
        f"{unit}",
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*["" if v is None else str(v) for v in r])
    return t


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _emit(args: argparse.Namespace, data: Any, render: Callable[[], Any]) -> None:
    if args.json:
        json.dump(data, sys.stdout, indent=2, default=str)
        print()
    else:
        _console().print(render())


def info(table: DeltaTable) -> dict[str, Any]:
    """What ``deltadv info`` shows, as a dict."""
    adds = table.get_add_actions(flatten=False).to_pydict()
    deleted = sum(c or 0 for c in adds["dv_cardinality"])
    dv_files = {
        p
        for p, t in zip(adds["dv_path_or_inline_dv"], adds["dv_storage_type"], strict=True)
        if t in ("u", "p")
    }
    dvs = {u: s for u, s in zip(adds["dv_unique_id"], adds["dv_size_in_bytes"], strict=True) if u}
    protocol = table.protocol()
    return {
        "uri": table.table_uri,
        "version": table.version(),
        "min_reader_version": protocol.get("minReaderVersion"),
        "min_writer_version": protocol.get("minWriterVersion"),
        "reader_features": protocol.get("readerFeatures") or [],
        "writer_features": protocol.get("writerFeatures") or [],
        "partition_columns": table.metadata().get("partitionColumns", []),
        "files": len(adds["path"]),
        "bytes": sum(adds["size_bytes"]),
        "rows": table.count(),
        "deleted_rows": deleted,
        "files_with_dv": sum(1 for c in adds["dv_cardinality"] if c),
        "dv_files": len(dv_files),
        "dv_bytes": sum(dvs.values()),
    }


def _plot(stats: Any, path: str, threshold: float) -> None:
    """Deleted-row ratio per file (bars, grouped by partition) and per partition."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'deltadv[plot]'") from None
    rows = sorted(
        stats.to_pylist(), key=lambda r: (json.dumps(r["partition"], sort_keys=True), r["path"])
    )
    parts: dict[str, list[float]] = {}
    for r in rows:
        parts.setdefault(_partition_label(r["partition"]), []).append(r["deleted_ratio"])
    fig, (ax, bx) = plt.subplots(
        2, 1, figsize=(max(6.0, min(18.0, 0.12 * len(rows) + 4)), 7), constrained_layout=True
    )
    colors = ["#d62728" if r["deleted_ratio"] > threshold else "#1f77b4" for r in rows]
    ax.bar(range(len(rows)), [r["deleted_ratio"] for r in rows], color=colors, width=0.85)
    ax.axhline(threshold, color="black", linestyle="--", linewidth=1)
    ax.text(0, threshold, f" OPTIMIZE rewrites above {threshold:.0%}", va="bottom", fontsize=8)
    ax.set_xlabel(f"data files ({len(rows)}), by partition; red: over the ratio")
    ax.set_ylabel("deleted rows / rows")
    ax.set_title("Where deletes sit: deleted-row ratio per file")
    ax.set_xlim(-1, max(1, len(rows)))
    ax.set_xticks([])
    labels = list(parts)
    means = [sum(v) / len(v) if v else 0.0 for v in parts.values()]
    bx.bar(range(len(labels)), means, color="#2ca02c")
    bx.set_xticks(range(len(labels)))
    bx.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    bx.set_ylabel("mean ratio")
    bx.set_title("per partition")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _when(ms: Any) -> str:
    """A commit timestamp (ms) as UTC time."""
    from datetime import datetime, timezone

    if not isinstance(ms, int):
        return "" if ms is None else str(ms)
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _partition_label(partition: Any) -> str:
    if not partition:
        return "(unpartitioned)"
    return "/".join(f"{k}={v}" for k, v in partition.items())


def _metrics_table(title: str, metrics: dict[str, Any]) -> Any:
    return _table(title, ["metric", "value"], sorted(metrics.items()))


def _run_table_command(args: argparse.Namespace) -> int:
    options = _storage_options(args.storage_option)
    table = DeltaTable(args.uri, storage_options=options)
    cmd = args.command
    if cmd == "info":
        data = info(table)
        _emit(
            args,
            data,
            lambda: _table(
                f"{data['uri']} at version {data['version']}",
                ["", ""],
                [
                    (
                        "protocol",
                        f"reader {data['min_reader_version']}, writer {data['min_writer_version']}",
                    ),
                    ("reader features", ", ".join(data["reader_features"]) or "-"),
                    ("writer features", ", ".join(data["writer_features"]) or "-"),
                    ("partition columns", ", ".join(data["partition_columns"]) or "-"),
                    ("files", f"{data['files']} ({_bytes(data['bytes'])})"),
                    ("rows", data["rows"]),
                    ("deleted rows", data["deleted_rows"]),
                    ("files with a DV", data["files_with_dv"]),
                    ("DV files", f"{data['dv_files']} ({_bytes(data['dv_bytes'])} of DVs)"),
                ],
            ),
        )
    elif cmd == "files":
        stats = table.dv_stats()
        rows = stats.select(["path", "size_bytes", "num_records", "deleted_rows"]).to_pylist()
        _emit(
            args,
            rows,
            lambda: _table(
                f"{len(rows)} live files",
                ["path", "size", "rows", "deleted"],
                [
                    (r["path"], _bytes(r["size_bytes"]), r["num_records"], r["deleted_rows"])
                    for r in rows
                ],
            ),
        )
    elif cmd == "history":
        commits = table.history(args.limit)
        _emit(
            args,
            commits,
            lambda: _table(
                "history (newest first)",
                ["version", "timestamp", "operation", "parameters", "metrics"],
                [
                    (
                        c.get("version"),
                        _when(c.get("timestamp")),
                        c.get("operation"),
                        json.dumps(c.get("operationParameters", {})),
                        ", ".join(f"{k}={v}" for k, v in (c.get("operationMetrics") or {}).items()),
                    )
                    for c in commits
                ],
            ),
        )
    elif cmd == "dvs":
        stats = table.dv_stats()
        rows = stats.to_pylist()
        if args.plot:
            _plot(stats, args.plot, args.max_deleted_rows_ratio)
        with_dv = [r for r in rows if r["has_dv"]]
        data = {
            "files": [
                {
                    k: r[k]
                    for k in ("path", "partition", "num_records", "deleted_rows", "deleted_ratio")
                }
                for r in rows
            ],
            "files_with_dv": len(with_dv),
            "purge_would_rewrite": len(with_dv),
            "optimize_would_rewrite_for_ratio": sum(
                1 for r in rows if r["deleted_ratio"] > args.max_deleted_rows_ratio
            ),
            "plot": args.plot,
        }
        _emit(
            args,
            data,
            lambda: _table(
                f"{len(with_dv)} of {len(rows)} files have deleted rows"
                + (f"; plot written to {args.plot}" if args.plot else ""),
                ["path", "partition", "rows", "deleted", "ratio"],
                [
                    (
                        r["path"],
                        _partition_label(r["partition"]),
                        r["num_records"],
                        r["deleted_rows"],
                        f"{r['deleted_ratio']:.2%}",
                    )
                    for r in sorted(rows, key=lambda r: -r["deleted_ratio"])
                ],
            ),
        )
    elif cmd in ("purge", "optimize"):
        with _progress(cmd.upper(), "bins of files") as progress:
            if cmd == "purge":
                m = table.purge(args.partition_filter, args.target_size, progress=progress)
            else:
                m = table.optimize(
                    args.target_size,
                    args.partition_filter,
                    args.max_deleted_rows_ratio,
                    progress=progress,
                    full=args.full,
                )
        _emit(args, m, lambda: _metrics_table(f"{cmd.upper()}: version {m['version']}", m))
    elif cmd == "vacuum":
        with _progress("VACUUM", "files deleted") as progress:
            report = table.vacuum_report(
                args.retention_hours,
                dry_run=not args.apply,
                enforce_retention_duration=not args.no_enforce_retention,
                progress=progress,
                full=not args.lite,
            )
        verb = "would delete" if report["dry_run"] else "deleted"
        _emit(
            args,
            report,
            lambda: _table(
                f"VACUUM {verb} {len(report['files'])} files ({_bytes(report['bytes'])})"
                + (" -- dry run: pass --apply to delete" if report["dry_run"] else ""),
                ["path"],
                [(f,) for f in report["files"]],
            ),
        )
    elif cmd == "restore":
        target: int | str = int(args.target) if args.target.isdigit() else args.target
        m = table.restore(target)
        _emit(
            args,
            m,
            lambda: _metrics_table(
                f"RESTORE to version {m['restored_version']}: version {m['version']}", m
            ),
        )
    elif cmd == "sync-iceberg":
        s = table.sync_iceberg()
        title = (
            f"Iceberg metadata already mirrors Delta version {s['delta_version']}"
            if s["snapshot_id"] is None
            else f"Delta version {s['delta_version']} -> Iceberg snapshot {s['snapshot_id']} "
            f"({s['metadata_location']})"
        )
        _emit(
            args,
            s,
            lambda: _table(title, ["file written"], [(f,) for f in s["files_written"]]),
        )
    elif cmd == "generate":
        r = table.generate_symlink_manifest()
        _emit(
            args,
            r,
            lambda: _table(
                f"{len(r['manifests'])} manifests listing {r['data_files']} files",
                ["manifest"],
                [(m,) for m in r["manifests"]],
            ),
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deltadv", description="Delta Lake deletion vectors")
    parser.add_argument("--version", action="version", version=f"deltadv {deltadv.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def table_command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("uri", help="the table: a path or an s3://, az://, gs:// URI")
        p.add_argument(
            "--storage-option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a storage setting (AWS_REGION=..., ...); repeatable",
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return p

    table_command("info", "version, protocol, features, files, rows, deleted rows, DVs")
    table_command("files", "the live files with their rows and deleted rows")
    h = table_command("history", "the commits, newest first")
    h.add_argument("--limit", type=int, default=None)
    d = table_command("dvs", "deleted-row ratio per file and per partition")
    d.add_argument("--plot", metavar="FILE.png", help="draw where deletes sit to a PNG")
    d.add_argument("--max-deleted-rows-ratio", type=float, default=MAX_DELETED_ROWS_RATIO)
    for name, help in (
        ("purge", "REORG ... APPLY (PURGE): rewrite every file that has a DV"),
        ("optimize", "bin-pack small files; rewrite files with many deleted rows"),
    ):
        c = table_command(name, help)
        c.add_argument("--partition-filter", help="SQL over partition columns")
        c.add_argument("--target-size", type=int, help="bytes per file (default: the table's)")
        if name == "optimize":
            c.add_argument("--max-deleted-rows-ratio", type=float, default=MAX_DELETED_ROWS_RATIO)
            c.add_argument(
                "--full",
                action="store_true",
                help="OPTIMIZE ... FULL: also recluster files clustered by other columns",
            )
    v = table_command("vacuum", "list (dry run, the default) or delete unreferenced files")
    mode = v.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only list (the default)")
    mode.add_argument("--apply", action="store_true", help="delete the files")
    v.add_argument("--retention-hours", type=float, default=None)
    v.add_argument(
        "--lite",
        action="store_true",
        help="only files of expired tombstones in the log (no listing; misses orphans)",
    )
    v.add_argument(
        "--no-enforce-retention",
        action="store_true",
        help="allow a retention shorter than the table's (dangerous)",
    )
    r = table_command("restore", "restore an earlier version")
    r.add_argument("target", help="a version number or an ISO-8601 timestamp")
    table_command("generate", "write the symlink_format_manifest (no DV may be live)")
    table_command(
        "sync-iceberg", "mirror the latest version as Iceberg v3 metadata under metadata/"
    )

    read = sub.add_parser("read-dv", help="print the rows a DV descriptor marks deleted")
    read.add_argument("table_root")
    read.add_argument("descriptor", help="the deletionVector JSON object from the log")
    z85 = sub.add_parser("z85-decode", help="decode Delta-style Z85 to hex")
    z85.add_argument("text")
    z85.add_argument("size", type=int)
    sub.add_parser("demo", help="run the demo")
    return parser


TABLE_COMMANDS = frozenset(
    {
        "info",
        "files",
        "history",
        "dvs",
        "purge",
        "optimize",
        "vacuum",
        "restore",
        "generate",
        "sync-iceberg",
    }
)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in TABLE_COMMANDS:
            return _run_table_command(args)
        if args.command == "read-dv":
            dv = deltadv.DeletionVectorDescriptor.from_json(args.descriptor).read(args.table_root)
            json.dump(dv.to_numpy().tolist(), sys.stdout)
            print()
        elif args.command == "z85-decode":
            print(deltadv.z85_decode(args.text, args.size).hex())
        else:
            from deltadv.demo import main as demo

            return demo([])
    except (deltadv.DeltaDVError, ValueError, OSError) as err:
        print(f"deltadv: error: {err}", file=sys.stderr)
        return FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
