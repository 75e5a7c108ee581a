#!/usr/bin/env bash
# Fuzz lab: every parser a hostile server reaches on the client (sync pages, server-sent events,
# pack manifests, the cache's and the outbox's response headers), and the request body reader,
# the sync cursor and the Idempotency-Key field a hostile client reaches on the server, fuzzed with libFuzzer for
# FUZZ_SECONDS each (default 10), as many at a time as there are cores: about a minute and a
# half with the build on two. See scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
