"""``--threads N[,N...]`` for the benchmarks: the script once per thread count, each
in a subprocess of its own with ``DELTADV_NUM_THREADS=N`` (so deltadv's runtime is
built with that many workers), its report printed as it runs and its figures
handed back as JSON through ``--json-out``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def without_threads(argv: list[str]) -> list[str]:
    """``argv`` less its ``--threads`` option."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--threads":
            skip = True
        elif not a.startswith("--threads="):
            out.append(a)
    return out


def run_by_threads(script: str, counts: list[int]) -> dict[int, Any]:
    """``script`` (this process's arguments, ``--threads`` replaced) once per count,
    smallest first: what each run wrote to its ``--json-out`` file, by count. Exits
    with a message if a run fails."""
    results: dict[int, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted(counts):
            out = Path(tmp) / f"threads-{n}.json"
            argv = [*without_threads(sys.argv[1:]), "--threads", str(n), "--json-out", str(out)]
            print(f"\n======== --threads {n} (a subprocess) ========", flush=True)
            env = {**os.environ, "DELTADV_NUM_THREADS": str(n)}
            done = subprocess.run([sys.executable, script, *argv], env=env, check=False)
            if done.returncode != 0:
                sys.exit(f"FAIL: the run with --threads {n} exited {done.returncode}")
            results[n] = json.loads(out.read_text())
    return results
