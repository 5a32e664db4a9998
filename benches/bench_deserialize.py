"""Deserialize deletion-vector bytes to a uint64 numpy array: deltadv vs pyroaring.

For each set the bytes are produced once by ``deltadv.DeletionVector(rows).serialize()``
(the RoaringBitmapArray portable layout: a 4-byte magic, then the 64-bit roaring
"portable" format). Both libraries then decode the SAME bytes:

* deltadv:   ``DeletionVector.deserialize(b).to_numpy()``
* pyroaring: ``np.frombuffer(BitMap64.deserialize(memoryview(b)[4:]).to_array(), np.uint64)``
  (pyroaring reads the portable format, i.e. our bytes without the magic; the
  memoryview slice is zero-copy; ``to_array`` is pyroaring's bulk export, an
  ``array.array('Q')`` that ``np.frombuffer`` wraps without copying).

Both results are checked equal to the original rows before timing. Times are the
best of several repeats (timeit-style), in milliseconds per call. ``speed`` is
pyroaring's time / deltadv's (the goal: >= 1.00 in every row); the last line
gives the slowest case.

Run:  .venv/bin/python benches/bench_deserialize.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import platform
import timeit
from collections.abc import Callable

import numpy as np
import pyroaring

import deltadv

SEED = 20_240_917
MAGIC_LEN = 4


def make_sets(quick: bool) -> list[tuple[str, np.ndarray, bytes]]:
    """(name, rows, deltadv bytes) for each universe and shape."""
    universes = [(1_000_000, "1M")] if quick else [(1_000_000, "1M"), (10_000_000, "10M")]
    rng = np.random.default_rng(SEED)
    sets = []
    for universe, label in universes:
        idx = np.arange(universe, dtype=np.uint64)
        shapes = {
            "sparse": np.flatnonzero(rng.random(universe) < 0.001).astype(np.uint64),
            "dense": np.flatnonzero(rng.random(universe) < 0.5).astype(np.uint64),
            "runs": idx[idx % 10_000 < 1_000],
        }
        for name, rows in shapes.items():
            data = deltadv.DeletionVector(rows).serialize()
            sets.append((f"{label}/{name}", rows, data))
        # Same rows as "runs", but with run containers, as written by run-optimising
        # writers (e.g. Spark). deltadv does not run-optimise, so let pyroaring write
        # the portable bytes and put our magic in front.
        bm = pyroaring.BitMap64(shapes["runs"])
        bm.run_optimize()
        magic = sets[-1][2][:MAGIC_LEN]
        sets.append((f"{label}/runs_rle", shapes["runs"], magic + bm.serialize()))
    return sets


def deltadv_decode(data: bytes) -> np.ndarray:
    return deltadv.DeletionVector.deserialize(data).to_numpy()


def pyroaring_decode(data: bytes) -> np.ndarray:
    bm = pyroaring.BitMap64.deserialize(memoryview(data)[MAGIC_LEN:])
    return np.frombuffer(bm.to_array(), dtype=np.uint64)


def best_ms(fn: Callable[[], object], repeat: int, min_time: float = 0.05) -> float:
    """Best per-call time in ms over `repeat` rounds of an autoranged loop."""
    timer = timeit.Timer(fn)
    number, total = timer.autorange()  # calibrate: a loop taking >= 0.2 s
    # Keep the total short: scale the loop down to ~min_time per round.
    number = max(1, int(min_time * number / total))
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement (best of)")
    parser.add_argument("--quick", action="store_true", help="1M universe only")
    args = parser.parse_args()

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"pyroaring {pyroaring.__version__}, deltadv {deltadv.__version__}; best of {args.repeat}"
    )
    sets = make_sets(args.quick)

    for name, rows, data in sets:
        ours, theirs = deltadv_decode(data), pyroaring_decode(data)
        if not (ours.dtype == theirs.dtype == np.uint64):
            raise SystemExit(f"{name}: dtypes differ: {ours.dtype} vs {theirs.dtype}")
        if not (np.array_equal(ours, rows) and np.array_equal(theirs, rows)):
            raise SystemExit(f"{name}: decoded rows differ")

    header = (
        f"{'set':<13}{'rows':>10}{'bytes':>11}"
        f"{'deltadv ms':>12}{'pyroaring ms':>14}{'ratio':>8}{'speed':>8}"
        f"  | {'dv deser':>9}{'dv numpy':>9}{'pr deser':>9}{'pr numpy':>9}"
    )
    print(
        "\nend to end = deserialize + uint64 numpy array; "
        "ratio = deltadv / pyroaring (time), speed = pyroaring / deltadv"
    )
    print("right: the two steps timed separately (ms)")
    print(header)
    print("-" * len(header))
    speeds = []
    for name, rows, data in sets:
        view = memoryview(data)[MAGIC_LEN:]
        dv = deltadv.DeletionVector.deserialize(data)
        bm = pyroaring.BitMap64.deserialize(view)

        ours = best_ms(lambda data=data: deltadv_decode(data), args.repeat)
        theirs = best_ms(lambda data=data: pyroaring_decode(data), args.repeat)
        dv_deser = best_ms(lambda data=data: deltadv.DeletionVector.deserialize(data), args.repeat)
        dv_numpy = best_ms(dv.to_numpy, args.repeat)
        pr_deser = best_ms(lambda view=view: pyroaring.BitMap64.deserialize(view), args.repeat)
        pr_numpy = best_ms(lambda bm=bm: np.frombuffer(bm.to_array(), dtype=np.uint64), args.repeat)
        print(
            f"{name:<13}{len(rows):>10,}{len(data):>11,}"
            f"{ours:>12.3f}{theirs:>14.3f}{ours / theirs:>8.2f}{theirs / ours:>8.2f}"
            f"  | {dv_deser:>9.3f}{dv_numpy:>9.3f}{pr_deser:>9.3f}{pr_numpy:>9.3f}"
        )
        speeds.append((theirs / ours, name))
    slowest, where = min(speeds)
    verdict = "met" if slowest >= 1.0 else "not met"
    print(f"\nslowest: {where} at {slowest:.2f}x pyroaring's speed (goal >= 1.00: {verdict})")


if __name__ == "__main__":
    main()
