#!/usr/bin/env bash
# The lowest and the highest PySpark deltadv claims (the `spark` extra in pyproject.toml),
# without Delta Spark: for each, a venv in .cache/venv-pyspark-<X.Y> (kept between runs)
# with the wheel scripts/check-wheel.sh built, installed with its `spark` extra and that
# PySpark pinned, runs tests/python/test_spark_min.py and test_cli.py. The main suite runs
# the same tests with the test extra's pin (4.2, with Delta Spark).
# Usage: check-spark-min.sh [VERSION...] (default: all of SPARK_VERSIONS below).
# Needs .cache/wheel/dist from scripts/check-wheel.sh; WHEEL_PYTHON as there.
set -euo pipefail
cd "$(dirname "$0")/.."

# The extra's bounds ("pyspark>=3.5,<4.4") at their latest patch releases on PyPI, each
# with the oldest Python it installs on: PySpark 4.3 requires Python >= 3.11 (its
# Requires-Python), 3.5 runs on deltadv's oldest (3.10). Move them with the extra; the
# check below fails when one falls outside it.
SPARK_VERSIONS=(3.5.9:3.10 4.3.0:3.11)

shopt -s nullglob
wheels=(.cache/wheel/dist/deltadv-*-abi3-*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
    echo "check-spark-min: run scripts/check-wheel.sh first (no wheel in .cache/wheel/dist)" >&2
    exit 1
fi
wheel=$(realpath "${wheels[0]}")

wanted=("$@")
for entry in "${SPARK_VERSIONS[@]}"; do
    version=${entry%%:*}
    if [ "${#wanted[@]}" -gt 0 ] && [[ " ${wanted[*]} " != *" $version "* ]]; then
        continue
    fi
    .venv/bin/python - "$version" <<'PY'
import sys, tomllib
from packaging.requirements import Requirement
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]
(spec,) = [Requirement(s).specifier for s in extra if s.startswith("pyspark")]
assert sys.argv[1] in spec, f"check-spark-min: PySpark {sys.argv[1]} is outside the extra's {spec}"
PY
    venv=.cache/venv-pyspark-${version%.*}
    python=$(bash scripts/oldest-python.sh "${entry#*:}")
    if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    fi
    pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" "$wheel[spark]" "pyspark==$version" "pytest>=8"
    "${pip[@]}" --force-reinstall --no-deps "$wheel"  # same version number, new build

    "$venv/bin/python" - "$version" <<'PY'
import sys
from pathlib import Path

import deltadv._core
import pyspark

core = Path(deltadv._core.__file__)
assert "site-packages" in core.parts, f"deltadv imported from {core}, not the wheel"
assert pyspark.__version__ == sys.argv[1], pyspark.__version__
print(f"check-spark-min: PySpark {pyspark.__version__}, Python {sys.version.split()[0]}, {core}")
PY
    DELTADV_NO_DELTA_SPARK=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        tests/python/test_spark_min.py tests/python/test_cli.py
done
