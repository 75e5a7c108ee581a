#!/usr/bin/env bash
# Sync kill lab: a child process pulls a records collection from a live server into an SQLite
# file, page by page, and is killed with SIGKILL at random points, again and again, while other
# clients keep writing to that collection (new records, and new versions of old ones). Before
# about one pull in two the child's user edits rows too: the edits wait in the outbox, unsent,
# so pulls (and kills) meet writes on their way. After the kills, pulls run to the end until the
# device has caught up with the server's capture (at most 20, 0.5 s apart), and the table must
# equal the server's records plus the user's edits still on their way (those rows show the
# edit): none missing, none extra, none different. Then the edits are delivered and pulled back,
# and once capture has read them the table must equal the server's records alone. Meanwhile each
# edited row shows the user's value, in the app's form: `sync verify` counts it as different
# until the server's form of it comes down.
#
# Two server instances share one PostgreSQL database: the other clients write through one, the
# child pulls from the other, so their commits interleave across instances as in production.
# Needs root (the PostgreSQL cluster runs as the postgres user).
#
#   SYNC_KILL_KILLS   SIGKILLs to deliver (default 100)
#   SYNC_KILL_ROWS    records on the server before the first pull (default 3000)
#   OFFLINEKIT_BIN    the `offline` binary (default .build/debug/offline)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

require_offline sync-kill root
kills_wanted=${SYNC_KILL_KILLS:-100}
rows=${SYNC_KILL_ROWS:-3000}
time_limit=$((kills_wanted * 2 + 240))

work=$(mktemp -d /tmp/sync-kill.XXXXXX)
chmod 755 "$work"
server_pids=()
child_pid=""
writer_pid=""
cleanup() {
    [[ -n "$child_pid" ]] && kill -9 "$child_pid" 2>/dev/null || true
    [[ -n "$writer_pid" ]] && kill "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null || true
    for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
    stop_lab_postgres
    rm -rf "$work"
}
trap cleanup EXIT

start_lab_postgres sync-kill "$work/pg" synclab
start_offline_server sync-kill "$work/server-writes.log" --postgres "$pg_url" --demo-accounts
server_pids+=("$server_pid")
writes_url=$url
start_offline_server sync-kill "$work/server-pulls.log" --postgres "$pg_url" --demo-accounts
server_pids+=("$server_pid")

start=$SECONDS
"$bin" outbox drive --db "$work/seed.sqlite" --server "$writes_url" --count "$rows" --collection items >"$work/writer.log" 2>&1
echo "sync-kill: other clients write through $writes_url, the child pulls from $url (one PostgreSQL), $rows records written in $((SECONDS - start)) s; delivering $kills_wanted kills"

# Other clients write all along: ten new records, then new versions of records 0 to 19.
(
    count=$rows
    round=0
    while [[ ! -e "$work/stop" ]]; do
        count=$((count + 10))
        round=$((round + 1))
        "$bin" outbox drive --db "$work/seed.sqlite" --server "$writes_url" --count "$count" --collection items >>"$work/writer.log" 2>&1
        "$bin" outbox drive --db "$work/update-$round.sqlite" --server "$writes_url" --count 20 --collection items >>"$work/writer.log" 2>&1
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
    if kill_at_random 400 "$work/child.log" "$bin" sync pull --db "$work/app.sqlite" --server "$url" --page-size 50 \
        --local-edits $((RANDOM % 2 * (RANDOM % 3 + 1))); then
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
# The server captures its writers' changes from the database a few milliseconds after they
# commit: the device has caught up once a pull leaves it equal to the server. Pulls 0.5 s apart,
# at most 20: one that never converges fails the lab.
converge() {
    local attempt
    for attempt in $(seq 1 20); do
        if ! "$bin" sync pull --db "$work/app.sqlite" --server "$url" --page-size 50 >>"$work/child.log" 2>&1; then
            echo "sync-kill: FAILED: a pull after the kills did not finish cleanly"
            tail -20 "$work/child.log"
            exit 1
        fi
        if "$bin" sync verify --db "$work/app.sqlite" --server "$url" >"$work/verify.log" 2>&1; then
            cat "$work/verify.log"
            echo "sync-kill: caught up after $attempt pulls"
            return 0
        fi
        sleep 0.5
    done
    cat "$work/verify.log"
    echo "sync-kill: FAILED: the device did not catch up with the server in 20 pulls"
    exit 1
}

echo "sync-kill: $kills SIGKILLs, $completed pulls finished on their own, $written records and $((rounds * 20)) rewrites by other clients meanwhile, $((SECONDS - start)) s"
converge

# The edits delivered and pulled back: the server has them now, and nothing is held.
if ! "$bin" sync pull --db "$work/app.sqlite" --server "$url" --page-size 50 --deliver >>"$work/child.log" 2>&1; then
    echo "sync-kill: FAILED: delivering the edits and pulling them back did not finish cleanly"
    tail -20 "$work/child.log"
    exit 1
fi
echo "sync-kill: edits delivered and pulled back"
converge

# Where sync stands, as the device file says: every row in, the first sync done, a last pull on
# record, nothing on its way.
"$bin" sync status --db "$work/app.sqlite" | tee "$work/status.log"
grep -q "^first sync: done$" "$work/status.log" && grep -q "^edits on their way: 0," "$work/status.log" \
    && grep -q "^last pull that wrote: 20" "$work/status.log" \
    || { echo "sync-kill: FAILED: sync status does not say the device caught up"; exit 1; }
# The status line an app shows for that file, beside the monitor's verdict on the server.
"$bin" status --db "$work/app.sqlite" --probe-url "$url/health" | tee "$work/line.log"
grep -q "^status line: Up to date · Updated " "$work/line.log" \
    || { echo "sync-kill: FAILED: the status line does not say the device is up to date"; exit 1; }
