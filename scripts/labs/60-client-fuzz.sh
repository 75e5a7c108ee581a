#!/usr/bin/env bash
# Client fuzz lab: every parser a hostile server reaches on the client (sync pages, server-sent
# events, pack manifests, the cache's and the outbox's response headers) fuzzed with libFuzzer
# for FUZZ_SECONDS each (default 20): under three minutes with the build. See
# scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
