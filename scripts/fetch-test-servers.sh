#!/usr/bin/env bash
# Install the storage emulators the store conformance tests start on 127.0.0.1,
# into .cache/ (git-ignored), once: Azurite (Azure Blob, from npm) and
# fake-gcs-server (GCS, a Go module). Needs npm and go on the first run only.
# tests/python/store_servers.py finds them at .cache/azurite/node_modules/.bin/azurite-blob
# and .cache/bin/fake-gcs.
set -euo pipefail
cd "$(dirname "$0")/.."
AZURITE_VERSION=${AZURITE_VERSION:-3.37.0}

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

# fake-gcs-server serves neither object_store's XML-API uploads nor its list
# start-after (fsouza/fake-gcs-server#331), so tests/servers/fake-gcs wraps the
# emulator (the version pinned in its go.mod) with those two requests translated
# onto the emulator's own handlers; built with `go build`, modules from the proxy.
bin=$PWD/.cache/bin
src=tests/servers/fake-gcs
stamp="$bin/.fake-gcs.sum"
sum=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ] || [ ! -x "$bin/fake-gcs" ]; then
    if command -v go >/dev/null 2>&1; then
        echo "fetch-test-servers: fake-gcs ($(grep fake-gcs-server "$src/go.mod" | head -1 | xargs))"
        mkdir -p "$bin"
        rm -f "$bin/fake-gcs"
        (cd "$src" && go build -o "$bin/fake-gcs" .) 2>&1 | grep -v '^go: downloading' >&2 || true
        [ -x "$bin/fake-gcs" ] || { echo "fetch-test-servers: building fake-gcs failed" >&2; exit 1; }
        echo "$sum" >"$stamp"
    else
        echo "fetch-test-servers: go not found; the GCS store tests will not run" >&2
    fi
fi
