#!/usr/bin/env bash
# Outbox crash lab: a child process queues writes and drains them to a live server, and is killed
# with SIGKILL at random points, again and again. After each restart it carries on; at the end it
# drains to empty. The server's counts of effects per idempotency key must show zero lost and
# zero duplicated writes.
#
#   OUTBOX_CRASH_KILLS   SIGKILLs to deliver (default 200; raise it for a longer run)
#   OUTBOX_CRASH_BATCH   new writes queued per round (default 4)
#   OFFLINEKIT_BIN       the `offline` binary (default .build/debug/offline)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

require_offline outbox-crash
kills_wanted=${OUTBOX_CRASH_KILLS:-200}
batch=${OUTBOX_CRASH_BATCH:-10}
time_limit=${OUTBOX_CRASH_SECONDS:-$((kills_wanted * 2 + 60))}

work=$(mktemp -d /tmp/outbox-crash.XXXXXX)
server_pid=""
child_pid=""
cleanup() {
    [[ -n "$child_pid" ]] && kill -9 "$child_pid" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

start_offline_server outbox-crash "$work/server.log" --data "$work/server" --demo-accounts --faults
echo "outbox-crash: server at $url, delivering $kills_wanted kills"

kills=0
completed=0
count=0
start=$SECONDS
while ((kills < kills_wanted)); do
    if ((SECONDS - start > time_limit)); then
        echo "outbox-crash: FAILED: time limit of $time_limit s reached after $kills kills"
        exit 1
    fi
    count=$((count + batch))
    # A random point: during start-up, while queuing, or in the middle of delivery.
    if kill_at_random 250 "$work/child.log" "$bin" outbox drive --db "$work/app.sqlite" --server "$url" --count "$count"; then
        kills=$((kills + 1))
    else
        completed=$((completed + 1))
    fi
done

# A last run, not killed, drains everything that is left.
if ! "$bin" outbox drive --db "$work/app.sqlite" --server "$url" --count "$count" >>"$work/child.log" 2>&1; then
    echo "outbox-crash: FAILED: the final drain did not finish cleanly"
    tail -20 "$work/child.log"
    exit 1
fi
"$bin" outbox status --db "$work/app.sqlite"
echo "outbox-crash: $kills SIGKILLs, $completed runs finished on their own, $count writes, $((SECONDS - start)) s"
"$bin" outbox verify --server "$url" --count "$count"
