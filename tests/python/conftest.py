"""Shared fixtures: the golden tables in ../shared/golden."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(os.environ.get("DELTADV_GOLDEN", ROOT.parent / "shared" / "golden"))


@pytest.fixture(scope="session")
def golden() -> Path:
    """The golden corpus; skipped with a reason where absent (a user's clone),
    a failure where DELTADV_REQUIRE_GOLDEN=1 (CI)."""
    if (GOLDEN / "dv_contents.json").is_file():
        return GOLDEN
    message = f"golden tables not found at {GOLDEN} (set DELTADV_GOLDEN to their path)"
    if os.environ.get("DELTADV_REQUIRE_GOLDEN") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def dv_contents(golden: Path) -> dict[str, Any]:
    return json.loads((golden / "dv_contents.json").read_text())["tables"]
