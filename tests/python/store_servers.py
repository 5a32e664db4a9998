"""Real Azure Blob and GCS emulators on 127.0.0.1 for tests: Azurite (npm) and
fake-gcs-server (a Go module, wrapped in tests/servers/fake-gcs), both installed
into .cache by scripts/fetch-test-servers.sh. Each server runs in its own temporary
directory on a free port and is killed at the end. Without the binaries the tests
skip with a reason, except under CI=true, where they fail: CI never skips a store."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.python.s3server import _free_port

ROOT = Path(__file__).resolve().parents[2]
AZURITE_BLOB = ROOT / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
FAKE_GCS = ROOT / ".cache" / "bin" / "fake-gcs"

# Azurite's one built-in account and its published key (the emulator's, not a secret).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_API_VERSION = "2021-08-06"


def require_binary(path: Path, what: str) -> None:
    """Skip (locally) or fail (CI=true) when an emulator is not installed."""
    if path.is_file() and os.access(path, os.X_OK):
        return
    message = f"{what} not installed at {path}: run scripts/fetch-test-servers.sh (needs npm, go)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start (exit {proc.poll()}):\n{tail}")
        time.sleep(0.2)


def _answers(url: str) -> bool:
    """Whether an HTTP server answers at `url` (any status)."""
    try:
        urllib.request.urlopen(url, timeout=1)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def azurite_server() -> Iterator[str]:
    """Azurite's blob service on a free loopback port; yields the account's
    endpoint URL (path style: http://127.0.0.1:PORT/devstoreaccount1)."""
    require_binary(AZURITE_BLOB, "Azurite (azurite-blob)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="azurite-") as tmp:
        log = Path(tmp) / "azurite.log"
        args = [
            str(AZURITE_BLOB),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            tmp,
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ]
        with _process(args, log) as proc:
            endpoint = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
            _wait(lambda: _answers(f"{endpoint}?comp=list"), proc, log, "Azurite")
            yield endpoint


def azure_storage_options(endpoint: str) -> dict[str, str]:
    return {
        "AZURE_STORAGE_ACCOUNT_NAME": AZURE_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": AZURE_KEY,
        "AZURE_STORAGE_ENDPOINT": endpoint,
        "AZURE_ALLOW_HTTP": "true",
    }


def _azure_request(method: str, url: str) -> tuple[int, bytes]:
    """One Shared Key-signed request with no body to Azurite: (status, body).
    (Blob service Shared Key: the verb, twelve standard headers, the x-ms-
    headers and the account-qualified resource with its query, HMAC-SHA256.)"""
    parsed = urllib.parse.urlsplit(url)
    headers = {
        "x-ms-date": email.utils.formatdate(usegmt=True),
        "x-ms-version": AZURE_API_VERSION,
    }
    canonical_headers = "".join(f"{k}:{headers[k]}\n" for k in sorted(headers))
    resource = f"/{AZURE_ACCOUNT}{parsed.path}"
    query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
    for key in sorted(query):
        resource += f"\n{key.lower()}:{','.join(sorted(query[key]))}"
    to_sign = method + "\n" * 12 + canonical_headers + resource
    digest = hmac.new(base64.b64decode(AZURE_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {AZURE_ACCOUNT}:{base64.b64encode(digest).decode()}"
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read()


def azure_create_container(endpoint: str, container: str) -> None:
    status, body = _azure_request("PUT", f"{endpoint}/{container}?restype=container")
    if status != 201:
        raise RuntimeError(f"creating Azurite container {container!r}: HTTP {status} {body!r}")


def azure_list(endpoint: str, container: str, prefix: str) -> list[str]:
    """The blob names under `prefix`, as Azurite lists them (one page: tests
    hold far fewer than 5000 blobs)."""
    query = urllib.parse.urlencode({"comp": "list", "prefix": prefix, "restype": "container"})
    status, body = _azure_request("GET", f"{endpoint}/{container}?{query}")
    if status != 200:
        raise RuntimeError(f"listing Azurite container {container!r}: HTTP {status}")
    return sorted(e.text or "" for e in ElementTree.fromstring(body).iter("Name"))


@contextmanager
def gcs_server() -> Iterator[str]:
    """fake-gcs-server (in memory) on a free loopback port; yields its base URL."""
    require_binary(FAKE_GCS, "fake-gcs-server (tests/servers/fake-gcs)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="fake-gcs-") as tmp:
        log = Path(tmp) / "fake-gcs.log"
        with _process([str(FAKE_GCS), "-addr", f"127.0.0.1:{port}"], log) as proc:
            base = f"http://127.0.0.1:{port}"
            _wait(lambda: _answers(f"{base}/storage/v1/b"), proc, log, "fake-gcs-server")
            yield base


def gcs_storage_options(base: str) -> dict[str, str]:
    # object_store reads the emulator's URL, and that no OAuth is wanted, from
    # the service account key (the form object_store's own emulator tests use).
    key = {
        "gcs_base_url": base,
        "disable_oauth": True,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    }
    return {"GOOGLE_SERVICE_ACCOUNT_KEY": json.dumps(key), "GOOGLE_ALLOW_HTTP": "true"}


def gcs_list(base: str, bucket: str, prefix: str) -> list[str]:
    """The object names under `prefix`, through the emulator's JSON API."""
    query = urllib.parse.urlencode({"prefix": prefix})
    with urllib.request.urlopen(f"{base}/storage/v1/b/{bucket}/o?{query}", timeout=10) as r:
        return sorted(item["name"] for item in json.load(r).get("items", []))


def gcs_create_bucket(base: str, bucket: str) -> None:
    request = urllib.request.Request(
        f"{base}/storage/v1/b",
        data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        if response.status != 200:
            raise RuntimeError(f"creating fake-gcs bucket {bucket!r}: HTTP {response.status}")
