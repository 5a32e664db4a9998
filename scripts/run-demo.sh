#!/usr/bin/env bash
# Set up everything, then run the demo (makes its own data; no cloud, no ../shared needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m deltadv.demo "$@"
