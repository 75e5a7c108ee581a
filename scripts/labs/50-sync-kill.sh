#!/usr/bin/env bash
# Sync kill lab: a child process pulls a records collection from a live server into an SQLite
# file, page by page, and is killed with SIGKILL at random points, again and again, while other
# clients keep writing to that collection (new records, and new versions of old ones). After the
# kills, one last pull runs to the end, and the table must equal the server's records: none
# missing, none extra, none different.
#
#   SYNC_KILL_KILLS   SIGKILLs to deliver (default 100)
#   SYNC_KILL_ROWS    records on the server before the first pull (default 3000)
#   OFFLINEKIT_BIN    the `offline` binary (default .build/debug/offline)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

bin=${OFFLINEKIT_BIN:-$PWD/.build/debug/offline}
kills_wanted=${SYNC_KILL_KILLS:-100}
rows=${SYNC_KILL_ROWS:-3000}
time_limit=$((kills_wanted * 2 + 240))
[[ -x "$bin" ]] || { echo "sync-kill: no offline binary at $bin (swift build --product offline)"; exit 1; }

work=$(mktemp -d /tmp/sync-kill.XXXXXX)
server_pid=""
child_pid=""
writer_pid=""
cleanup() {
    [[ -n "$child_pid" ]] && kill -9 "$child_pid" 2>/dev/null || true
    [[ -n "$writer_pid" ]] && kill "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

start_offline_server sync-kill "$work/server.log" --data "$work/server" --demo-accounts

start=$SECONDS
"$bin" outbox drive --db "$work/seed.sqlite" --server "$url" --count "$rows" --collection items >"$work/writer.log" 2>&1
echo "sync-kill: server at $url, $rows records written in $((SECONDS - start)) s; delivering $kills_wanted kills"

# Other clients write all along: ten new records, then new versions of records 0 to 19.
(
    count=$rows
    round=0
    while [[ ! -e "$work/stop" ]]; do
        count=$((count + 10))
        round=$((round + 1))
        "$bin" outbox drive --db "$work/seed.sqlite" --server "$url" --count "$count" --collection items >>"$work/writer.log" 2>&1
        "$bin" outbox drive --db "$work/update-$round.sqlite" --server "$url" --count 20 --collection items >>"$work/writer.log" 2>&1
        rm -f "$work/update-$round.sqlite"*
    done
    echo "$count $round" >"$work/written"
) &
writer_pid=$!

kills=0
completed=0
start=$SECONDS
while ((kills < kills_wanted)); do
    if ((SECONDS - start > time_limit)); then
        echo "sync-kill: FAILED: time limit of $time_limit s reached after $kills kills"
        exit 1
    fi
    # A random point: starting, signing in, mid-page, between pages, or after the end.
    if kill_at_random 400 "$work/child.log" "$bin" sync pull --db "$work/app.sqlite" --server "$url" --page-size 50; then
        kills=$((kills + 1))
    else
        completed=$((completed + 1))
    fi
done

touch "$work/stop"
wait "$writer_pid"
writer_pid=""
read -r written rounds <"$work/written"

# A last pull, not killed, brings what is left.
if ! "$bin" sync pull --db "$work/app.sqlite" --server "$url" --page-size 50 >>"$work/child.log" 2>&1; then
    echo "sync-kill: FAILED: the last pull did not finish cleanly"
    tail -20 "$work/child.log"
    exit 1
fi
echo "sync-kill: $kills SIGKILLs, $completed pulls finished on their own, $written records and $((rounds * 20)) rewrites by other clients meanwhile, $((SECONDS - start)) s"
"$bin" sync verify --db "$work/app.sqlite" --server "$url"
