"""Every DV in golden/dv_contents.json decodes, through a descriptor taken from the
table's own log JSON, to exactly the listed row indexes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from deltadv import DeletionVectorDescriptor

PLACEHOLDER = "{{FOLDER_WITH_SPECIAL_CHAR}}"
TEST_PREFIX = "test%dv%prefix-"  # Delta Spark test-build DV file names (INDEX.md caveat 1)
KEYS = ("storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality")


def _log_descriptors(table: Path) -> list[dict[str, Any]]:
    found = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove"):
                dv = (action.get(kind) or {}).get("deletionVector")
                if dv:
                    found.append(dv)
    return found


def _root_for(table: Path, d: DeletionVectorDescriptor, links: Path) -> str:
    """The table, or a dir of links giving test-prefixed DV files their spec names."""
    path = Path(d.absolute_path(str(table)) or "")
    if path.is_file():
        return str(table)
    prefixed = path.with_name(TEST_PREFIX + path.name)
    assert prefixed.is_file(), f"{path.name} missing in {table}"
    link = links / path.name
    if not link.exists():
        os.symlink(prefixed, link)
    return str(links)


def test_every_golden_dv(golden: Path, dv_contents: dict[str, Any], tmp_path: Path) -> None:
    checked = 0
    for table_rel, entries in dv_contents.items():
        table = golden / table_rel
        in_log = _log_descriptors(table)
        for entry in entries:
            listed = entry["descriptor"]
            log_js = next(d for d in in_log if all(d.get(k) == listed.get(k) for k in KEYS))
            text = json.dumps(log_js)
            forms = [text]
            if PLACEHOLDER in text:
                raw = str(table / "folder&with%special char")
                encoded = raw.replace("%", "%25").replace(" ", "%20")
                forms = [text.replace(PLACEHOLDER, raw), text.replace(PLACEHOLDER, encoded)]
            for form in forms:
                d = DeletionVectorDescriptor.from_json(form)
                root = _root_for(table, d, tmp_path) if d.storage_type == "u" else str(table)
                dv = d.read(root)
                assert list(dv) == entry["deleted_row_indexes"], (table_rel, form)
                assert dv.to_numpy().tolist() == entry["deleted_row_indexes"]
            checked += 1
    assert checked == 122
