#!/usr/bin/env bash
# Print the oldest Python deltadv supports (3.10) if this machine has one that runs
# (pyenv-aware), else python3; $WHEEL_PYTHON overrides. Used by the wheel and
# lowest-PySpark checks, which install into fresh venvs.
set -euo pipefail
if [ -n "${WHEEL_PYTHON:-}" ]; then
    echo "$WHEEL_PYTHON"
    exit 0
fi
for candidate in python3.10 "$(pyenv root 2>/dev/null)/versions/3.10"*/bin/python3.10; do
    if "$candidate" -c '' >/dev/null 2>&1; then
        echo "$candidate"
        exit 0
    fi
done
echo python3
