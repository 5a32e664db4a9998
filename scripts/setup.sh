#!/usr/bin/env bash
# Set up everything deltadv needs on a fresh machine: a Python venv in .venv with
# the build and test dependencies, and the Rust extension built into it.
# Idempotent: re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found. Install Rust (https://rustup.rs) and re-run." >&2
    exit 1
fi
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    echo "setup: creating .venv"
    rm -rf .venv
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# Build the extension (release) and install the package with its test and dev extras.
.venv/bin/python -m pip install -q -e '.[test,dev]'
# Delta Spark's jars (the reference oracle in tests), from Maven Central into .cache/jars.
if command -v mvn >/dev/null 2>&1; then
    bash scripts/fetch-delta-jars.sh >/dev/null
else
    echo "setup: mvn not found; Delta Spark oracle tests will fail until .cache/jars is filled" >&2
fi
# Azurite and fake-gcs-server (the Azure and GCS store tests' servers) into .cache.
bash scripts/fetch-test-servers.sh
echo "setup: done ($(.venv/bin/python -c 'import deltadv; print("deltadv", deltadv.__version__)'))"
