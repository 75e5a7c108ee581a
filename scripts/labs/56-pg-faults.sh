#!/usr/bin/env bash
# PostgreSQL's own faults under the app's psql writers, with a check of every state a device
# showed. Two `offline serve --sync-rules` instances (the first streaming capture's slot, the
# second polling it) reach the database through a TCP proxy of the lab, as through a virtual IP:
# a failover moves the proxy, not the servers. The rules sync `lab_issues` (the table issues)
# to the members of each issue's project (the table project_members): ana is in p1 and p2, ben
# in p1 and p3 when it starts.
#
# Phase after phase, psql sessions commit transactions of 1 to 20 statements (batches of issues
# inserted in one project, issues updated, whole batches moved or deleted) while ben leaves p1
# and joins again, joins p2 and leaves it, ana joins p4 and leaves it, leaves p2 and joins again
# (sometimes with a batch of that project in the same transaction), and two devices of each user
# pull from the instances in turn. Then comes a fault: `pg_ctl restart -m fast`, `pg_ctl restart -m immediate`, capture's
# sessions terminated (`pg_terminate_backend`), capture's slot dropped by an operator, or a
# failover (a standby made by `pg_basebackup`, the primary stopped `-m immediate`, the standby
# promoted, the proxy moved to it; the lab goes on there). The writers write a few seconds more
# and pause: every device must then equal, field by field, the rows its user may see now (read by
# psql), before a deadline; the lab says how long that took after the fault.
#
# The history check: a second logical slot (`test_decoding`, read by `pg_recvlogical`, connected
# to the primary itself) records every commit, the order of truth. Each state a device held after
# a pull that ended with 0 must be the rows its user could see after some commit, and a device's
# states must follow the commits' order (a torn transaction or a step back fails). Before each
# check the checker must reject a torn transaction and a step back planted from the real log.
# The run itself is scripts/labs/pg_faults.py. Needs root (the PostgreSQL clusters run as the
# postgres user). Everything listens on 127.0.0.1 only.
#
#   PG_FAULTS_FAST         `pg_ctl restart -m fast` faults (default 10)
#   PG_FAULTS_IMMEDIATE    `pg_ctl restart -m immediate` faults (default 10)
#   PG_FAULTS_TERMINATE    capture's sessions terminated (default 2)
#   PG_FAULTS_SLOT_DROP    capture's slot dropped (default 1)
#   PG_FAULTS_FAILOVER     failovers to a standby, near the end (default 1)
#   PG_FAULTS_KINDS        the kinds run, comma-separated, of fast, immediate, terminate, slot-drop,
#                          failover (default all; `none`: one phase without a fault)
#   PG_FAULTS_BEFORE       seconds the writers write before each fault (default 3)
#   PG_FAULTS_AFTER        seconds they write after it, before the quiet point (default 3)
#   PG_FAULTS_DEADLINE     seconds every device has, once the writers pause, to equal the truth (default 60)
#   PG_FAULTS_WRITERS      concurrent psql writers of issues, besides the memberships' (default 2)
#   PG_FAULTS_PAUSE_MS     a writer's mean pause between transactions (default 150)
#   PG_FAULTS_MAX_BATCH    most issues in one batch (default 8)
#   PG_FAULTS_MAX_ROWS     issues past which the writers delete more than they insert (default 600)
#   PG_FAULTS_PULL_PAUSE_MS  a device's mean pause between pulls (default 300)
#   PG_FAULTS_TIME_LIMIT   seconds after which no further fault starts, the run failed (default 900)
#   PG_FAULTS_KEEP_GOING   when set, go on with the next fault after one that failed (the lab stops
#                          at the first otherwise)
#   PG_FAULTS_SEED         the random seed (default: a new one, printed)
#   PG_FAULTS_KEEP         when set, keep the logs, the truth files, the devices' SQLite files and
#                          the stopped clusters
#   OFFLINEKIT_BIN         the `offline` binary (default .build/debug/offline)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=pg-faults
require_offline "$lab" root
"$bin" sync pull --help | grep -q -- '--synced' || { echo "$lab: $bin has no sync pull --synced (rebuild it)"; exit 1; }

work=$(mktemp -d /tmp/pg-faults.XXXXXX)
chmod 755 "$work"
: >"$work/pids"
helper_pid=""
cleanup() {
    if [[ -n "$helper_pid" ]]; then
        kill "$helper_pid" 2>/dev/null || true
        wait "$helper_pid" 2>/dev/null || true
    fi
    # What the helper started and did not stop (it was killed, say): each line a pid and its
    # executable, so that a pid taken since by another process is left alone.
    while read -r pid exe; do
        [[ -n "$pid" && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] && kill -9 "$pid" 2>/dev/null || true
    done <"$work/pids"
    wait 2>/dev/null || true
    stop_lab_postgres
    # The standbys that failovers promoted.
    for data in "$work"/standby*/data; do
        if [[ -f "$data/postmaster.pid" ]]; then
            as_postgres "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    if [[ -n "${PG_FAULTS_KEEP:-}" ]]; then
        echo "$lab: logs, truth files, SQLite files and the (stopped) clusters kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
start_lab_postgres "$lab" "$work/pg" faultslab
[[ $(psql_lab -d faultslab -c "SHOW wal_level") == logical ]] || { echo "$lab: PostgreSQL does not run with wal_level = logical"; exit 1; }
for setting in max_wal_senders max_replication_slots; do
    (($(psql_lab -c "SHOW $setting") >= 10)) || { echo "$lab: $setting is below 10"; exit 1; }
done
# The standby's base backup and its stream connect for replication over TCP.
if ! grep -qE '^host[[:space:]]+replication[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$pg_folder/data/pg_hba.conf"; then
    echo "host replication all 127.0.0.1/32 trust" >>"$pg_folder/data/pg_hba.conf"
    psql_lab -c "SELECT pg_reload_conf()" >/dev/null
fi

# The app's tables, as its backend made them: OfflineKit knows nothing of them but the rules.
# lab_marker is the lab's own: a row marks a point of the truth recorder's log.
psql_lab -d faultslab -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE projects (id text PRIMARY KEY, name text);
CREATE TABLE project_members (project_id text, member text, PRIMARY KEY (project_id, member));
CREATE TABLE issues (id text PRIMARY KEY, project_id text NOT NULL, title text NOT NULL, body text, version int NOT NULL,
                     done boolean NOT NULL, batch text NOT NULL, batch_size int NOT NULL);
CREATE INDEX issues_batch ON issues (batch);
CREATE TABLE lab_marker (id text PRIMARY KEY);
INSERT INTO projects VALUES ('p1', 'Apollo'), ('p2', 'Borealis'), ('p3', 'Cassini'), ('p4', 'Dawn');
-- The demo accounts' user ids: ana and ben share p1, ana alone is in p2, ben alone in p3.
INSERT INTO project_members VALUES ('p1', 'ana'), ('p2', 'ana'), ('p1', 'ben'), ('p3', 'ben');
-- Issues from before: one batch of 10 in each project.
INSERT INTO issues SELECT 'seed-' || p || '-' || i, p, 'seed issue ' || i, CASE WHEN i % 3 = 0 THEN NULL ELSE 'from before' END,
                          1, i % 2 = 0, 'seed-' || p, 10
                   FROM unnest(ARRAY['p1', 'p2', 'p3', 'p4']) AS p, generate_series(1, 10) AS i;
SQL

cat >"$work/rules.yaml" <<'YAML'
audiences:
  project:
    table: project_members
    user: member
    key: project_id
collections:
  lab_issues:
    table: issues
    key: id
    columns:
      id: id
      project: project_id
      title: title
      body: body
      version: version
      done: done
      batch: batch
      batchSize: batch_size
    seen_by:
      - project: project_id
YAML
echo "$lab: PostgreSQL 15 primary on $pg_port (wal_level logical), the app's tables made, ready in $((SECONDS - start)) s"

status=0
LAB_WORK=$work LAB_BIN=$bin LAB_PG_BIN=$pg_bin LAB_PG_PORT=$pg_port LAB_PG_FOLDER=$pg_folder LAB_DB=faultslab \
    LAB_RULES=$work/rules.yaml python3 scripts/labs/pg_faults.py run &
helper_pid=$!
wait "$helper_pid" || status=$?
helper_pid=""

# What the pulls that failed said (a server or PostgreSQL down, mostly), and what the servers
# logged amiss.
if grep -qh 'Error' "$work"/client-*.log 2>/dev/null; then
    echo "$lab: pull errors (count, message):"
    grep -h 'Error' "$work"/client-*.log | sed -E 's/[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+/ADDRESS/g' | sort | uniq -c | sort -rn | head -5
fi
if ((status != 0)); then
    echo "$lab: server log lines saying error or warning (count, line):"
    grep -hiE 'error|warning|critical' "$work"/server*.log 2>/dev/null | sed -E 's/^[0-9T:.+-]+ //' | sort | uniq -c | sort -rn | head -20 || true
    echo "$lab: events, last 30:"
    tail -30 "$work/events" 2>/dev/null || true
fi
echo "$lab: $([[ $status -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - start)) s"
exit "$status"
