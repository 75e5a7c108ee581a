#!/usr/bin/env bash
# Writers that are not OfflineKit: psql sessions write to the app's own PostgreSQL tables while
# two `offline serve --sync-rules` instances capture their commits through logical decoding and
# devices pull them. The rules sync `team_messages` (the table messages) to the members of each
# message's workspace (the table memberships): ana and ben share w1, ana alone is in w2, ben
# alone in w3.
#
# For SYNC_PSQL_SECONDS, several psql sessions insert batches of messages (one transaction each,
# every row of a batch saying the batch's size, a random pg_sleep inside), rewrite bodies, delete
# or move whole batches, and ben leaves w1 and comes back, joins w2 and leaves it (move-out,
# move-in), sometimes with a batch of that workspace in the same transaction; another session
# inserts, moves and deletes large batches, recorded by capture in parts. Meanwhile ana and
# ben pull from the instances (each from its own, sometimes from the other) into SQLite files,
# SIGKILLed at random points, and the lab SIGKILLs instances (sometimes both at once) and starts
# them again on the same database: capture must go on from its slot, skipping nothing. The first
# instance streams the slot (`--capture-stream`), the second polls it: whichever leads after a
# kill goes on from where the other stopped. After
# every pull that ended on its own, no batch may be half there and ana may hold nothing of w3.
# When the writers stop, pulls run until each device holds exactly the rows its user may see now,
# field by field: none missing, none extra, none different (at most SYNC_PSQL_CONVERGE pulls).
# The run itself is scripts/labs/psql_writers.py. Needs root (the PostgreSQL cluster runs as the
# postgres user). Everything listens on 127.0.0.1 only.
#
#   SYNC_PSQL_SECONDS       time the writers write (default 60)
#   SYNC_PSQL_WRITERS       concurrent psql writers of messages (default 4)
#   SYNC_PSQL_SERVER_KILLS  server SIGKILLs during the writing (default 4)
#   SYNC_PSQL_KILL_MS       longest time before a pull is SIGKILLed (default 1500; 6 pulls in 10 are)
#   SYNC_PSQL_MAX_BATCH     most messages in one batch (default 8)
#   SYNC_PSQL_LARGE_EVERY   mean seconds between two transactions of a large batch, 2,001 to 2,400
#                           rows, which capture records in parts (default 8; 0: none)
#   SYNC_PSQL_PAUSE_MS      a writer's mean pause between transactions (default 150: about 20
#                           transactions a second in all, which capture keeps up with here)
#   SYNC_PSQL_CAPTURE_WAIT  seconds capture may take to read the last commit once the writers stop (default 60)
#   SYNC_PSQL_CONVERGE      pulls allowed to catch up after the writers stop (default 20)
#   SYNC_PSQL_SEED          the random seed (default: a new one, printed)
#   SYNC_PSQL_KEEP          when set, keep the logs, the devices' SQLite files and the stopped PostgreSQL cluster
#   OFFLINEKIT_BIN          the `offline` binary (default .build/debug/offline)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=psql-writers
require_offline "$lab" root
"$bin" sync pull --help | grep -q -- '--synced' || { echo "$lab: $bin has no sync pull --synced (rebuild it)"; exit 1; }

work=$(mktemp -d /tmp/psql-writers.XXXXXX)
chmod 755 "$work"
: >"$work/server-pids"
server_pids=()
helper_pid=""
cleanup() {
    if [[ -n "$helper_pid" ]]; then
        kill "$helper_pid" 2>/dev/null || true
        wait "$helper_pid" 2>/dev/null || true
    fi
    # The instances started here, and those the helper started again after killing them.
    for pid in "${server_pids[@]}" $(cat "$work/server-pids" 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    stop_lab_postgres
    if [[ -n "${SYNC_PSQL_KEEP:-}" ]]; then
        echo "$lab: logs, SQLite files and the (stopped) PostgreSQL cluster kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

start=$SECONDS
start_lab_postgres "$lab" "$work/pg" writerslab
[[ $(psql_lab -d writerslab -c "SHOW wal_level") == logical ]] || { echo "$lab: PostgreSQL does not run with wal_level = logical"; exit 1; }

# The app's tables, as its backend made them: OfflineKit knows nothing of them but the rules.
psql_lab -d writerslab -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE memberships (user_id text, workspace_id text, PRIMARY KEY (user_id, workspace_id));
CREATE TABLE messages (id text PRIMARY KEY, workspace_id text NOT NULL, author_id text NOT NULL, body text NOT NULL,
                       batch text NOT NULL, batch_size int NOT NULL);
CREATE INDEX messages_batch ON messages (batch);
-- The demo accounts' user ids: ana and ben share w1, ana alone is in w2, ben alone in w3.
INSERT INTO memberships VALUES ('ana', 'w1'), ('ben', 'w1'), ('ana', 'w2'), ('ben', 'w3');
SQL

# The built-in rules already name a collection messages and an audience workspace (the demo's
# chat): the app's own take other names.
cat >"$work/rules.yaml" <<'YAML'
audiences:
  team:
    table: memberships
    user: user_id
    key: workspace_id
collections:
  team_messages:
    table: messages
    key: id
    columns:
      id: id
      workspace: workspace_id
      author: author_id
      text: body
      batch: batch
      batchSize: batch_size
    seen_by:
      - team: workspace_id
YAML

urls=()
logs=()
capture_reads=("--capture-stream" "")
for i in 0 1; do
    # One at a time: two instances migrating an empty database at once would race.
    # shellcheck disable=SC2086 # the second instance's empty option is no argument
    start_offline_server "$lab" "$work/server$i.log" --postgres "$pg_url" --demo-accounts --sync-rules "$work/rules.yaml" ${capture_reads[$i]}
    server_pids+=("$server_pid")
    # The helper may SIGKILL it: no job report from this shell then.
    disown "$server_pid"
    urls+=("$url")
    logs+=("$work/server$i.log")
done
echo "$lab: PostgreSQL on $pg_port (wal_level logical), instances at ${urls[*]}, ready in $((SECONDS - start)) s"

status=0
LAB_WORK=$work LAB_BIN=$bin LAB_PSQL=$pg_bin/psql LAB_PG_PORT=$pg_port LAB_DB=writerslab LAB_PG_URL=$pg_url \
    LAB_RULES=$work/rules.yaml LAB_URLS="${urls[*]}" LAB_SERVER_PIDS="${server_pids[*]}" LAB_SERVER_LOGS="${logs[*]}" \
    python3 scripts/labs/psql_writers.py run &
helper_pid=$!
wait "$helper_pid" || status=$?
helper_pid=""

# What the pulls that failed said (an instance down, mostly), and what the servers logged amiss.
if grep -qh 'Error' "$work"/client-*.log 2>/dev/null; then
    echo "$lab: pull errors (count, message):"
    grep -h 'Error' "$work"/client-*.log | sed -E 's/[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+/ADDRESS/g' | sort | uniq -c | sort -rn | head -5
fi
if ((status != 0)); then
    echo "$lab: server log lines saying error or warning (count, line):"
    grep -hiE 'error|warning|critical' "${logs[@]}" | sed -E 's/^[0-9T:.+-]+ //' | sort | uniq -c | sort -rn | head -20 || true
    echo "$lab: events (kills, restarts, membership changes), last 40:"
    tail -40 "$work/events"
fi
echo "$lab: $([[ $status -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - start)) s"
exit "$status"
