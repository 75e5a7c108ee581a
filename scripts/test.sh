#!/usr/bin/env bash
# Runs every test OfflineKit has: the Swift test suite (unit and integration), then the labs
# that need root (network namespaces, process kills). Needs root and Debian for the labs.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# Every target declares each module it imports (Xcode's explicit-module builds require it).
python3 scripts/check-imports.py
# Every public type of a documented library is in its DocC catalog's topics.
python3 scripts/check-docc-topics.py

# The package's own sources build without a warning: an app that adds OfflineKit by path sees
# every warning of ours in its build. CI builds from clean, so every file is compiled and every
# warning shows; locally an incremental build shows only those of the files it recompiled.
swift build --build-tests 2>&1 | tee /tmp/offlinekit-swift-build.log
root="$(pwd -P)/"
warnings=$(awk -v root="$root" 'index($0, root "Sources/") == 1 || index($0, root "Tests/") == 1 || index($0, root "Examples/") == 1' \
    /tmp/offlinekit-swift-build.log | grep -F ': warning: ' | sort -u || true)
count=$(printf '%s' "$warnings" | grep -c . || true)
echo "warnings: $count in the package's sources"
if [[ "$count" -ne 0 ]]; then
    printf '%s\n' "$warnings"
    exit 1
fi
swift build --product offline

# Integration tests find their tools through these; plain `swift test` skips them.
export OFFLINEKIT_INTEGRATION=1
export OFFLINEKIT_BIN="$PWD/.build/debug/offline"
# In parallel, two at a time. Every test shares one process, and so one cooperative pool of two
# threads on a 2-core machine: whatever holds one of them without suspending delays every timer,
# request and server of every other test. The stall watch (Tests/OfflineKitTests/Diagnostics,
# run with OFFLINEKIT_STALL_WATCH=SECONDS) found what held them for over a second at a time: the
# reference server making its sample audio sample by sample at every start, a test polling with
# usleep, and the shared PostgreSQL cluster started and given databases under a lock on the pool.
# All three are fixed, and four at a time runs the suite in about 50 s against 90 s at two, but
# it still failed 2 clean-clone runs of 3 by chance (a server's idle timer late, a demo that never
# drew in its terminal), so CI stays at two until those are explained.
# Whatever the machine, never all at once (Swift Testing's default): the end-to-end demo tests
# drive real servers, nginx, child processes and a network switch each.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-2}"
swift test 2>&1 | tee /tmp/offlinekit-swift-test.log
test "${PIPESTATUS[0]}" -eq 0

passed=0
failed=0
for lab in scripts/labs/*.sh; do
    [[ -e "$lab" ]] || continue
    echo "== lab: $lab"
    if bash "$lab"; then
        passed=$((passed + 1))
    else
        echo "== lab FAILED: $lab"
        failed=$((failed + 1))
    fi
done
echo "labs: $passed passed, $failed failed"
test "$failed" -eq 0
