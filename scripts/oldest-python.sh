#!/usr/bin/env bash
# Print the oldest Python deltadv supports (3.10), or with an argument the oldest at
# least that version (`oldest-python.sh 3.11`: PySpark 4.3 needs it), if this machine
# has one that runs (pyenv-aware), else python3; $WHEEL_PYTHON overrides where it is
# recent enough. Used by the wheel and PySpark checks, which install into fresh venvs.
set -euo pipefail
min=${1:-3.10}
recent() { "$1" -c "import sys; sys.exit(sys.version_info[:2] < (${min/./, }))" >/dev/null 2>&1; }
if [ -n "${WHEEL_PYTHON:-}" ] && { [ $# -eq 0 ] || recent "$WHEEL_PYTHON"; }; then
    echo "$WHEEL_PYTHON"
    exit 0
fi
for minor in 10 11 12 13 14; do
    [ "$minor" -ge "${min#3.}" ] || continue
    for candidate in "python3.$minor" "$(pyenv root 2>/dev/null)/versions/3.$minor"*/bin/"python3.$minor"; do
        if recent "$candidate"; then
            echo "$candidate"
            exit 0
        fi
    done
done
echo python3
