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
# `--build-tests` builds every target, the `offline` tool the integration tests and labs run
# included; `swift test --skip-build` below does not plan the same build a second time (12–14 s).
test -x .build/debug/offline

# Integration tests find their tools through these; plain `swift test` skips them.
export OFFLINEKIT_INTEGRATION=1
export OFFLINEKIT_BIN="$PWD/.build/debug/offline"
# The labs' helpers: each lab runs alone or in a lane, and says how it went.
# Runs lab $1 and reports how it went; returns its status.
run_lab() {
    local started=$SECONDS status=0
    echo "== lab: $1"
    [[ -e "$1" ]] || { echo "no such lab"; status=1; }
    ((status)) || bash "$1" || status=$?
    if ((status == 0)); then
        echo "== lab passed in $((SECONDS - started)) s: $1"
    else
        echo "== lab FAILED after $((SECONDS - started)) s: $1"
    fi
    return "$status"
}
passed=0
failed=0
count() { # status
    if (($1 == 0)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
placed=()
lanes=()
lane_pids=()
lane_logs=()
# Starts the labs named in $1 (one string) one after another in the background, their output
# kept and printed once the foreground labs have run. The lane's status is how many of its labs
# failed.
start_lane() {
    local labs log
    read -r -a labs <<<"$1"
    placed+=("${labs[@]}")
    log=$(mktemp)
    (
        failures=0
        for lab in "${labs[@]}"; do run_lab "$lab" || failures=$((failures + 1)); done
        exit "$failures"
    ) >"$log" 2>&1 &
    lanes+=("$1")
    lane_pids+=($!)
    lane_logs+=("$log")
}
# A run that stops early (a failed test) takes its lanes with it.
trap 'for pid in "${lane_pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done' EXIT

# The labs, in three parts, so that a run takes about the time of its longest lane rather than
# the sum of all labs (726 s one after another on two cores; the labs beside each other take
# longer each, as they share the cores).
# - Lanes beside the others: each runs its labs one after another in the background, its output
#   kept and printed once it ends.
#   - The first starts with the test suite. The connectivity lab spends most of its 150 s waiting
#     out the monitor's own timers (the 5 s anti-flap rule, probe intervals, a 20 s soak) in
#     namespaces of its own; its limits (10 to 90 s for each verdict) are far above what the load
#     beside it adds. The psql writers' lab and the PostgreSQL faults lab follow it: their
#     checks are of rows and of the states devices showed, with deadlines of a minute.
#   - The second starts after the test suite, whose timers it would crowd: the fuzzers run for a
#     fixed time each, and the API contract lab a fixed number of cases; the load beside them
#     makes the first try fewer inputs and the second take longer, nothing more.
# - The other labs, in the foreground, one after another.
# - Last, once every lane has ended, the labs that hold other users' requests to fixed times
#   (the attack lab's /health p99 of 50 ms, the hiccup lab's queue emptied in 2 s): the fuzzers'
#   two busy cores beside them would be counted against the server they measure.
start_lane "scripts/labs/20-connectivity.sh scripts/labs/55-psql-writers.sh scripts/labs/56-pg-faults.sh"

# In parallel, four at a time. Every test shares one process, and so one cooperative pool of two
# threads on a 2-core machine: whatever holds one of them without suspending delays every timer,
# request and server of every other test. The stall watch (Tests/OfflineKitTests/Diagnostics,
# run with OFFLINEKIT_STALL_WATCH=SECONDS) found what held them for over a second at a time (the
# sample audio made sample by sample, a test polling with usleep, the shared PostgreSQL cluster
# started under a lock); the failures seen at four at a time were then traced to child processes
# keeping the tests' sockets open (see OfflineTestSupport's ChildProcess), to the demo's
# migrations deadlocking the pool, and to `eventually` spinning on Task.yield (it now sleeps
# between checks). Four at a time: 96 to 111 s here against 132 s at two.
# Whatever the machine, never all at once (Swift Testing's default): the end-to-end demo tests
# drive real servers, nginx, child processes and a network switch each.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-4}"
# HostileServerTests run in the attack lab (75-server-attacks.sh), beside the server's cases,
# where their figures are read; not twice.
swift test --skip-build --skip HostileServerTests 2>&1 | tee /tmp/offlinekit-swift-test.log
test "${PIPESTATUS[0]}" -eq 0

start_lane "scripts/labs/60-client-fuzz.sh scripts/labs/70-api-contract.sh"
last=(scripts/labs/60-outbox-hiccup.sh scripts/labs/75-server-attacks.sh)
placed+=("${last[@]}")
for lab in scripts/labs/*.sh; do
    [[ " ${placed[*]} " == *" $lab "* ]] && continue
    status=0
    run_lab "$lab" || status=$?
    count "$status"
done
for i in "${!lane_pids[@]}"; do
    status=0
    wait "${lane_pids[$i]}" || status=$?
    echo "== lane run beside the others: ${lanes[$i]}"
    cat "${lane_logs[$i]}"
    rm -f "${lane_logs[$i]}"
    read -r -a labs <<<"${lanes[$i]}"
    passed=$((passed + ${#labs[@]} - status))
    failed=$((failed + status))
done
lane_pids=()
for lab in "${last[@]}"; do
    status=0
    run_lab "$lab" || status=$?
    count "$status"
done
echo "labs: $passed passed, $failed failed"
test "$failed" -eq 0
