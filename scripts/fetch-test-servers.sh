#!/usr/bin/env bash
# Install the storage emulators the store conformance tests start on 127.0.0.1,
# into .cache/ (git-ignored), once: Azurite (Azure Blob, from npm) and
# fake-gcs-server (GCS, a Go module). Needs npm and go on the first run only.
# tests/python/store_servers.py finds them at .cache/azurite/node_modules/.bin/azurite-blob
# and .cache/bin/fake-gcs-server.
set -euo pipefail
cd "$(dirname "$0")/.."
AZURITE_VERSION=${AZURITE_VERSION:-3.37.0}
FAKE_GCS_VERSION=${FAKE_GCS_VERSION:-v1.56.1}

azurite=.cache/azurite
stamp="$azurite/.version"
if [ "$(cat "$stamp" 2>/dev/null)" != "$AZURITE_VERSION" ]; then
    if command -v npm >/dev/null 2>&1; then
        echo "fetch-test-servers: azurite@$AZURITE_VERSION"
        mkdir -p "$azurite"
        npm install --silent --no-audit --no-fund --prefix "$azurite" "azurite@$AZURITE_VERSION"
        echo "$AZURITE_VERSION" >"$stamp"
    else
        echo "fetch-test-servers: npm not found; the Azure store tests will not run" >&2
    fi
fi

bin=$PWD/.cache/bin
stamp="$bin/.fake-gcs-server.version"
if [ "$(cat "$stamp" 2>/dev/null)" != "$FAKE_GCS_VERSION" ]; then
    if command -v go >/dev/null 2>&1; then
        echo "fetch-test-servers: fake-gcs-server@$FAKE_GCS_VERSION"
        mkdir -p "$bin"
        GOBIN=$bin GOFLAGS=-mod=mod go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"
        echo "$FAKE_GCS_VERSION" >"$stamp"
    else
        echo "fetch-test-servers: go not found; the GCS store tests will not run" >&2
    fi
fi
