#!/usr/bin/env python3
"""Build starting corpora for the fuzz targets under fuzz/corpus/<target>/.

Seeds come from the golden tables (../../shared/golden, or $DELTADV_GOLDEN) when
present: every DV frame of every .bin file, and the inline (Z85) descriptors.
A few hand-made seeds are added either way. Safe to re-run; files are named by
content hash. libFuzzer works without seeds, it just needs longer to find the
magic numbers and the CRC.
"""
import hashlib
import json
import os
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = Path(os.environ.get("DELTADV_GOLDEN", HERE.parent.parent / "shared" / "golden"))
CORPUS = HERE / "corpus"
PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376


def put(target: str, data: bytes) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def bitmap32(values) -> bytes:
    """Portable 32-bit RoaringBitmap with array containers only (no runs)."""
    groups = {}
    for v in sorted(set(values)):
        groups.setdefault(v >> 16, []).append(v & 0xFFFF)
    keys = sorted(groups)
    out = struct.pack("<II", 12346, len(keys))
    for k in keys:
        out += struct.pack("<HH", k, len(groups[k]) - 1)
    offset = len(out) + 4 * len(keys)
    for k in keys:
        out += struct.pack("<I", offset)
        offset += 2 * len(groups[k])
    for k in keys:
        out += b"".join(struct.pack("<H", v) for v in groups[k])
    return out


def portable(rows) -> bytes:
    buckets = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<IQ", PORTABLE_MAGIC, len(buckets))
    for k in sorted(buckets):
        out += struct.pack("<I", k) + bitmap32(buckets[k])
    return out


def native(rows) -> bytes:
    buckets = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    n = max(buckets) + 1 if buckets else 0
    out = struct.pack(">Ii", NATIVE_MAGIC, n)
    for k in range(n):
        b = bitmap32(buckets.get(k, []))
        out += struct.pack(">i", len(b)) + b
    return out


def frames(file: bytes):
    """(offset, size, bitmap bytes) of each frame in a DV file."""
    at = 1
    while at + 4 <= len(file):
        (size,) = struct.unpack(">i", file[at : at + 4])
        if size < 0 or at + 8 + size > len(file):
            return
        yield at, size, file[at + 4 : at + 4 + size]
        at += 8 + size


def parse_seed(offset: int, size: int, card: int, buf: bytes) -> bytes:
    # dv_file_parse parse mode: ctl 0x96 = raw u32 sizeInBytes, 8-byte
    # cardinality, 4-byte offset, buf_start 0.
    return bytes([0x96]) + struct.pack("<IQI", offset, card, size) + buf


# predicate_parse: the grammar's forms (see src/scan/predicate.rs).
PREDICATES = [
    "id = 5",
    "5 < id",
    "NOT id >= -3",
    "id IN (1, 2) AND part IS NOT NULL",
    "`a name` <> 1 or x <= 1.5e3",
    "id between 1 and 10",
    "s = 'it''s'",
    "d = DATE '2024-01-02' OR ts > TIMESTAMP '2024-01-02 03:04:05.123456+01:00'",
    "id NOT IN (1)",
    "id <=> NULL",
    "(amount >= 1.25 AND b = TRUE) OR NOT (x < .5 AND s IS NULL)",
    "part = 'p1' AND ts <= '2023-11-14T22:13:20Z'",
]

SCHEMA_SEED = (
    '{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":'
    '{"type":"map","keyType":"string","valueType":"decimal(10,2)","valueContainsNull":true},'
    '"containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":1,'
    '"delta.columnMapping.physicalName":"col-a"}}]}'
)


def log_line_seeds() -> None:
    """log_line: golden commit files (mode 0), and their stats (1) and schemas (2)."""
    seen = set()
    for path in sorted(GOLDEN.rglob("_delta_log/*.json")):
        data = path.read_bytes()
        if len(data) > 64 * 1024:
            continue
        put("log_line", bytes([0]) + data)
        for line in data.splitlines():
            try:
                action = json.loads(line)
            except ValueError:
                continue
            stats = (action.get("add") or {}).get("stats")
            schema = (action.get("metaData") or {}).get("schemaString")
            for mode, text in ((1, stats), (2, schema)):
                if text and (mode, text) not in seen:
                    seen.add((mode, text))
                    put("log_line", bytes([mode]) + text.encode())


def main() -> None:
    samples = [[], [0], [0, 9], [3, 7, 70000], [1 << 32, (7 << 32) + 9], list(range(100))]
    for rows in samples:
        put("bitmap_decode", portable(rows))
        put("bitmap_decode", native(rows))
        # write_then_read: one DV per sample, single rows in bucket 0.
        put("dv_file_parse", bytes([1, len(rows[:31])]) + b"".join(
            bytes([0, 0]) + struct.pack("<I", r & 0xFFFFFFFF) for r in rows[:31]))
    for text in ["HelloWorld", "vBn[lx{q8@P<9BNH/isA", "##a00"]:
        put("z85_decode", bytes([0]) + text.encode())
    put("z85_decode", bytes([1]) + bytes(range(13)))
    for text in PREDICATES:
        put("predicate_parse", text.encode())
    put("log_line", bytes([1]) + b'{"numRecords":3,"minValues":{"id":1},"tightBounds":false}')
    put("log_line", bytes([2]) + SCHEMA_SEED.encode())

    if not (GOLDEN / "dv_contents.json").is_file():
        print(f"no golden tables at {GOLDEN}; hand-made seeds only")
        return
    log_line_seeds()

    contents = json.loads((GOLDEN / "dv_contents.json").read_text())
    cardinality = {}  # (file name, offset) -> descriptor cardinality
    for dvs in contents.get("tables", {}).values():
        for dv in dvs:
            d = dv.get("descriptor", {})
            name = dv.get("dv_file_expected_by_spec")
            if name:
                cardinality[(name, d.get("offset", 1))] = d.get("cardinality", 0)
    for path in sorted(GOLDEN.rglob("*.bin")):
        file = path.read_bytes()
        name = path.name.removeprefix("test%dv%prefix-")
        for offset, size, data in frames(file):
            put("bitmap_decode", data)
            card = cardinality.get((name, offset), 0)
            put("dv_file_parse", parse_seed(offset, size, card, file))
    for dvs in contents.get("tables", {}).values():
        for dv in dvs:
            d = dv.get("descriptor", {})
            if d.get("storageType") == "i":
                text = d["pathOrInlineDv"].encode()
                n = d["sizeInBytes"]
                put("z85_decode", bytes([2]) + struct.pack("<H", n) + text)
                put("z85_decode", bytes([0 | ((-n % 4) << 2)]) + text)
    for t in sorted(CORPUS.iterdir()):
        print(t.name, len(list(t.iterdir())))


if __name__ == "__main__":
    main()
