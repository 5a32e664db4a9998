#!/usr/bin/env bash
# Package deltadv the way a user gets it and check the result:
#  - `maturin build --release`: one abi3 wheel (cp310-abi3). Same features, flags and
#    interpreter as setup.sh's `pip install -e`, so cargo reuses that build.
#  - `maturin sdist`: the source distribution holds no tests, benches or scripts.
#  - the wheel installed into a fresh venv (outside the repository), imported there,
#    `deltadv --version`, `python -m deltadv --version`, and tests/wheel_smoke.py.
# Leaves the wheel in .cache/wheel/dist for scripts/check-spark-min.sh.
# WHEEL_PYTHON: the interpreter of the fresh venv (default: python3.10, the lowest
# Python deltadv supports, where installed; else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.cache/wheel
rm -rf "$OUT"
mkdir -p "$OUT/dist"
.venv/bin/maturin build --release -i .venv/bin/python --out "$OUT/dist"
.venv/bin/maturin sdist --out "$OUT/dist"

shopt -s nullglob
wheels=("$OUT"/dist/deltadv-*.whl)
sdists=("$OUT"/dist/deltadv-*.tar.gz)
if [ "${#wheels[@]}" -ne 1 ] || [ "${#sdists[@]}" -ne 1 ]; then
    echo "check-wheel: expected one wheel and one sdist in $OUT/dist" >&2
    exit 1
fi
wheel=$(realpath "${wheels[0]}")
sdist=$(realpath "${sdists[0]}")
case "$(basename "$wheel")" in
    deltadv-*-cp310-abi3-*.whl) ;;
    *) echo "check-wheel: $(basename "$wheel") is not a cp310-abi3 wheel" >&2; exit 1 ;;
esac

# The sdist: what builds the wheel (and the license), nothing else.
listing=$(tar tzf "$sdist")
for f in Cargo.toml Cargo.lock pyproject.toml README.md LICENSE src/lib.rs python/deltadv/__init__.py; do
    if ! grep -qx "deltadv-[^/]*/$f" <<<"$listing"; then
        echo "check-wheel: $f missing from $(basename "$sdist")" >&2
        exit 1
    fi
done
if grep -E '^deltadv-[^/]*/(tests|benches|scripts|fuzz|docs|\.ci)/' <<<"$listing"; then
    echo "check-wheel: the sdist holds the files above; it should not" >&2
    exit 1
fi
# Its Cargo.toml must still parse without tests/ and benches/ (maturin drops their targets).
mkdir "$OUT/sdist"
tar xzf "$sdist" -C "$OUT/sdist"
cargo metadata --offline --no-deps --format-version 1 \
    --manifest-path "$OUT"/sdist/deltadv-*/Cargo.toml >/dev/null

# A fresh venv with the wheel; numpy and pyarrow from PyPI (pip's cache after the first run).
python=$(bash scripts/oldest-python.sh)
"$python" -m venv "$OUT/venv"
"$OUT/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
smoke=$(realpath tests/wheel_smoke.py)
version=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("deltadv"))')
cd "$OUT"  # away from the source tree: only the installed wheel can be imported
for out in "$(venv/bin/deltadv --version)" "$(venv/bin/python -m deltadv --version)"; do
    if [ "$out" != "deltadv $version" ]; then
        echo "check-wheel: --version printed '$out', expected 'deltadv $version'" >&2
        exit 1
    fi
done
venv/bin/python "$smoke"
echo "check-wheel: ok ($(basename "$wheel"), sdist $(basename "$sdist"), $("$python" --version))"
