#!/usr/bin/env bash
# Issue 28's many-core measurements in one run, for a machine lent with more cores
# (the device: 16 cores, Python 3.12 with pyarrow and numpy, no network, no Java).
#
#   bash benches/device-issue28.sh WHEEL [WHEEL_BEFORE]
#
# WHEEL: deltadv's abi3 wheel (`.venv/bin/maturin build --release -i .venv/bin/python
# --out .cache/wheel/dist`, as scripts/check-wheel.sh builds it), carried to the
# machine (e.g. `carry: [".cache/wheel/dist"]`). WHEEL_BEFORE: a second wheel (an
# earlier commit, built the same way from a worktree) measured the same way, for an
# A/B on the same machine. Each wheel goes into a venv of its own that sees the
# machine's pyarrow and numpy (--system-site-packages, --no-deps: nothing is
# downloaded). Runs, per wheel:
#   - bench_scan.py on issue 28's table (16 files x 1M rows, 10% deleted), all cores,
#     then the same pinned to 2 (`taskset -c 0,1`): the 16 / 2 wall ratio (goal <= 0.2)
#     and deltadv / pyarrow;
#   - bench_stream_memory.py --only deltadv-scan at the machine's default thread count
#     and at 2 threads: peak RSS (goal <= 512 MB at the default).
# Logs (and a summary of the lines that carry the figures) go to $OUT (default
# /tmp/deltadv-device). FILES, ROWS, MEM_ROWS shrink the tables for a rehearsal on a
# small machine, e.g. `FILES=2 ROWS=200000 MEM_ROWS=1000000`. About 5 minutes a wheel
# on 16 cores, the tables' build included (once, shared by both wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
    echo "usage: bash benches/device-issue28.sh WHEEL [WHEEL_BEFORE]" >&2
    exit 2
fi
out=${OUT:-/tmp/deltadv-device}
files=${FILES:-16}
rows=${ROWS:-1000000}
mem_rows=${MEM_ROWS:-12582912}
python=${PYTHON:-python3}
mkdir -p "$out"
cpus=$("$python" -c 'import os; print(len(os.sched_getaffinity(0)))')
echo "device-issue28: $cpus CPUs, $("$python" --version), out $out" | tee "$out/summary.txt"

for label_wheel in "after:${1}" ${2:+"before:${2}"}; do
    label=${label_wheel%%:*}
    wheel=$(realpath "${label_wheel#*:}")
    venv=/tmp/deltadv-device-venv-$label
    rm -rf "$venv"
    "$python" -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install -q --no-deps --no-index --disable-pip-version-check "$wheel"
    py="$venv/bin/python"
    echo "== $label: $(basename "$wheel")" | tee -a "$out/summary.txt"
    scan=(benches/bench_scan.py --dir /tmp/deltadv-device-scan --files "$files"
        --rows-per-file "$rows" --repeat 5 --levels 10 --peers none)
    "$py" "${scan[@]}" >"$out/$label-scan-all.log" 2>&1
    taskset -c 0,1 "$py" "${scan[@]}" >"$out/$label-scan-2cpus.log" 2>&1
    memory=(benches/bench_stream_memory.py --dir /tmp/deltadv-device-mem
        --rows-per-file "$mem_rows" --only deltadv-scan)
    "$py" "${memory[@]}" >"$out/$label-memory-default.log" 2>&1
    "$py" "${memory[@]}" --threads 2 >"$out/$label-memory-2threads.log" 2>&1
    for log in scan-all scan-2cpus memory-default memory-2threads; do
        echo "-- $label $log" >>"$out/summary.txt"
        grep -E "^\s+(full|dv10|pyarrow|deltadv-scan)\s+[0-9,]+\s" "$out/$label-$log.log" \
            >>"$out/summary.txt" || echo "   (no figure lines: see $label-$log.log)" >>"$out/summary.txt"
    done
done
cat "$out/summary.txt"
