#!/usr/bin/env bash
# The lowest PySpark deltadv claims (the `spark` extra's lower bound in pyproject.toml),
# without Delta Spark: a venv in .cache/venv-pyspark-min (kept between runs) with the
# wheel scripts/check-wheel.sh built, installed with its `spark` extra and that PySpark
# pinned, runs tests/python/test_spark_min.py and test_cli.py. The main suite runs the
# same tests with the highest PySpark (the test extra's pin).
# Needs .cache/wheel/dist from scripts/check-wheel.sh; WHEEL_PYTHON as there.
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
wheels=(.cache/wheel/dist/deltadv-*-abi3-*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
    echo "check-spark-min: run scripts/check-wheel.sh first (no wheel in .cache/wheel/dist)" >&2
    exit 1
fi
wheel=$(realpath "${wheels[0]}")
# "pyspark>=4.1,<4.3" in the spark extra -> 4.1 (== 4.1 is 4.1.0 under PEP 440).
lowest=$(.venv/bin/python - <<'PY'
import re, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]
(spec,) = [s for s in extra if s.startswith("pyspark")]
print(re.search(r">=\s*([0-9.]+)", spec).group(1))
PY
)

venv=.cache/venv-pyspark-min
python=$(bash scripts/oldest-python.sh)
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
fi
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "$wheel[spark]" "pyspark==$lowest" "pytest>=8"
"${pip[@]}" --force-reinstall --no-deps "$wheel"  # same version number, new build

"$venv/bin/python" - "$lowest" <<'PY'
import sys
from pathlib import Path

import deltadv._core
import pyspark

core = Path(deltadv._core.__file__)
assert "site-packages" in core.parts, f"deltadv imported from {core}, not the wheel"
assert pyspark.__version__.startswith(sys.argv[1]), pyspark.__version__
print(f"check-spark-min: PySpark {pyspark.__version__}, Python {sys.version.split()[0]}, {core}")
PY
DELTADV_NO_DELTA_SPARK=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/python/test_spark_min.py tests/python/test_cli.py
