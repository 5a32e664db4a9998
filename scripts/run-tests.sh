#!/usr/bin/env bash
# Set up everything, then run the whole test suite: lints, Rust tests, Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# In CI the golden tables in ../shared/golden must be there: a missing corpus fails
# instead of skipping.
if [ "${CI:-}" = "true" ]; then export DELTADV_REQUIRE_GOLDEN=1; fi
# A CI run builds once: incremental state would only take disk (GBs beside the build).
if [ "${CI:-}" = "true" ]; then export CARGO_INCREMENTAL=0; fi

echo "== rust: fmt, clippy"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo clippy --features python -- -D warnings
echo "== rust: tests"
cargo test
# The extension's own Rust tests (its allocator's arenas), linked against the venv's Python.
PYO3_PYTHON="$PWD/.venv/bin/python" cargo test --features python --lib python::
# CI disks can be nearly full: the debug build is not used after this point (the
# Python tests load the release build), so a CI run gives its space back.
if [ "${CI:-}" = "true" ]; then rm -rf target/debug; fi
echo "== python: ruff"
.venv/bin/ruff check python tests benches
.venv/bin/ruff format --check python tests benches
echo "== python: stubs (_core.pyi against the built module)"
.venv/bin/python -m mypy.stubtest deltadv._core
echo "== python: wheel and sdist (fresh venv), lowest and highest PySpark"
bash scripts/check-wheel.sh
bash scripts/check-spark-min.sh
echo "== python: tests"
.venv/bin/python -m pytest tests/python
