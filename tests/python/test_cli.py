"""The command line as a user runs it: the ``deltadv`` console script and
``python -m deltadv``, each in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import deltadv

# pip puts the console script next to the interpreter of the environment.
SCRIPT = Path(sys.executable).with_name("deltadv")
COMMANDS = {"script": [str(SCRIPT)], "module": [sys.executable, "-m", "deltadv"]}


@pytest.fixture(params=sorted(COMMANDS))
def command(request: pytest.FixtureRequest) -> list[str]:
    return COMMANDS[request.param]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_version(command: list[str]) -> None:
    out = run(*command, "--version")
    assert out.returncode == 0, out.stderr
    # The installed distribution's version (pyproject.toml), which the Rust crate's
    # version (Cargo.toml, deltadv.__version__) must match.
    assert out.stdout == f"deltadv {version('deltadv')}\n"
    assert deltadv.__version__ == version("deltadv")


def test_no_command_prints_usage(command: list[str]) -> None:
    out = run(*command)
    assert out.returncode == 2
    assert "usage: deltadv" in out.stderr


def test_z85_decode_spec_vector(command: list[str]) -> None:
    # The test vector of the Z85 specification (ZeroMQ RFC 32).
    out = run(*command, "z85-decode", "HelloWorld", "8")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "864fd26fb559f75b\n"


def test_read_dv(command: list[str], tmp_path: Path) -> None:
    rows = [0, 7, 42, 1 << 33]
    (desc,) = deltadv.write_deletion_vectors(str(tmp_path), [deltadv.DeletionVector(rows)])
    out = run(*command, "read-dv", str(tmp_path), json.dumps(desc.to_json()))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == rows


def test_error_is_a_message_not_a_traceback(command: list[str], tmp_path: Path) -> None:
    descriptor = {
        "storageType": "p",
        "pathOrInlineDv": str(tmp_path / "missing.bin"),
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    out = run(*command, "read-dv", str(tmp_path), json.dumps(descriptor))
    assert out.returncode == 1
    assert out.stderr.startswith("deltadv: error: ")
    assert "Traceback" not in out.stderr
