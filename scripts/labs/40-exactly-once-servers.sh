#!/usr/bin/env bash
# Exactly-once across server crashes: two `offline serve` instances share one PostgreSQL database
# behind nginx, which may resend a write to the other instance when one dies mid-request. A client
# (`offline outbox drive`) queues and delivers numbered writes through nginx while the lab SIGKILLs,
# at random points, the client or either server (a killed server is restarted at once on its port).
# At the end the client drains to empty and the server's effect counts per idempotency key must
# show zero lost and zero duplicated writes. It also prints the longest stall after a server kill:
# the time from the kill until nginx acknowledged the next write.
#
#   SERVER_CRASH_KILLS     SIGKILLs to deliver, client and servers together (default 200)
#   SERVER_CRASH_BATCH     new writes queued by each client run (default 40)
#   SERVER_CRASH_SECONDS   time allowed for the kills (default 200 + KILLS / 2)
#   OFFLINEKIT_BIN         the `offline` binary (default .build/debug/offline)
#
# Needs root (the PostgreSQL cluster runs as the `postgres` user), Debian's postgresql and nginx.
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

kills_wanted=${SERVER_CRASH_KILLS:-200}
batch=${SERVER_CRASH_BATCH:-40}
time_limit=${SERVER_CRASH_SECONDS:-$((200 + kills_wanted / 2))}
lab=server-crash
require_offline "$lab" root
command -v nginx >/dev/null || { echo "$lab: no nginx (scripts/setup.sh installs it)"; exit 1; }

work=$(mktemp -d /tmp/server-crash.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/nginx/logs"
events="$work/events"       # "EPOCHSECONDS.FRACTION what" lines: kills, restarts, client runs
: >"$events"

declare -a server_pid=("" "") server_port=("" "")
nginx_pid=""
child_pid=""
cleanup() {
    [[ -n "$child_pid" ]] && kill -9 "$child_pid" 2>/dev/null || true
    for i in 0 1; do
        [[ -n "${server_pid[$i]}" ]] && kill -9 "${server_pid[$i]}" 2>/dev/null || true
    done
    [[ -n "$nginx_pid" ]] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
    stop_lab_postgres
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

now() { echo "$EPOCHREALTIME"; }
note() { echo "$(now) $*" >>"$events"; }
accepts() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# SIGKILLs process $1 and reaps it, without bash's "Killed" report for the job.
kill_and_reap() { { kill -9 "$1" && wait "$1"; } 2>/dev/null || [[ $? -eq 137 ]]; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_lab_postgres "$lab" "$work/pg" crashlab

# Starts server $1 on port $2 (0 picks one) in the background, appending to its log.
start_server() {
    "$bin" serve --postgres "$pg_url" --port "$2" --demo-accounts --faults >>"$work/server$1.log" 2>&1 &
    server_pid[$1]=$!
}
# Waits until server $1 logs its port (first start) and accepts connections.
await_server() {
    local i=$1
    for _ in $(seq 1 300); do
        if [[ -z "${server_port[$i]}" ]]; then
            server_port[$i]=$(grep -o 'listening on [a-z:/]*127\.0\.0\.1:[0-9]*' "$work/server$i.log" 2>/dev/null \
                | head -1 | grep -o '[0-9]*$' || true)
        fi
        [[ -n "${server_port[$i]}" ]] && accepts "${server_port[$i]}" && return 0
        kill -0 "${server_pid[$i]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "$lab: server $i did not start"
    tail -20 "$work/server$i.log"
    exit 1
}
# One at a time: two instances migrating an empty database at once would race.
start_server 0 0; await_server 0
start_server 1 0; await_server 1

# nginx in front of both, allowed to resend any write (PUT, POST, PATCH, DELETE) to the other
# instance when the first fails mid-request. max_fails=0: a killed instance is tried again at
# once (a refused connection costs nothing on loopback), so a restarted one is found at once.
nginx_port=$(free_port)
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user root;"
cat >"$work/nginx/nginx.conf" <<EOF
$user_line
daemon off;
master_process on;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 512; }
http {
    log_format writes '\$msec \$request_method \$status \$request_uri upstream=\$upstream_addr statuses=\$upstream_status';
    access_log $work/nginx/logs/access.log writes;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    upstream offline {
        server 127.0.0.1:${server_port[0]} max_fails=0;
        server 127.0.0.1:${server_port[1]} max_fails=0;
    }
    server {
        listen 127.0.0.1:$nginx_port;
        location / {
            proxy_pass http://offline;
            proxy_next_upstream error timeout non_idempotent;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 1s;
            proxy_send_timeout 10s;
            proxy_read_timeout 10s;
        }
    }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/logs/error.log" >/dev/null 2>&1 &
nginx_pid=$!
for _ in $(seq 1 100); do accepts "$nginx_port" && break; sleep 0.1; done
accepts "$nginx_port" || { echo "$lab: nginx did not start"; cat "$work/nginx/logs/error.log"; exit 1; }
url="http://127.0.0.1:$nginx_port"
echo "$lab: servers on ports ${server_port[0]} and ${server_port[1]}, nginx at $url, PostgreSQL on $pg_port; delivering $kills_wanted kills"

count=0
start_child() {
    count=$((count + batch))
    "$bin" outbox drive --db "$work/app.sqlite" --server "$url" --count "$count" >>"$work/child.log" 2>&1 &
    child_pid=$!
    note "client-start"
}

kills=0
client_kills=0
declare -a server_kills=(0 0)
completed=0
failed_runs=0
unexpected_exits=0
skipped=0
start=$SECONDS
while ((kills < kills_wanted)); do
    if ((SECONDS - start > time_limit)); then
        echo "$lab: time limit of $time_limit s reached after $kills kills; verifying what was done"
        break
    fi
    # A client run that ended on its own is counted, and a new one queues the next batch.
    if [[ -n "$child_pid" ]] && ! kill -0 "$child_pid" 2>/dev/null; then
        status=0
        wait "$child_pid" || status=$?
        completed=$((completed + 1))
        if ((status != 0)); then
            failed_runs=$((failed_runs + 1))
            note "client-exit $status"
        fi
        child_pid=""
    fi
    [[ -z "$child_pid" ]] && start_child
    # A server that died without being killed here is restarted too (and counted).
    for i in 0 1; do
        if ! kill -0 "${server_pid[$i]}" 2>/dev/null; then
            wait "${server_pid[$i]}" 2>/dev/null || true
            unexpected_exits=$((unexpected_exits + 1))
            note "server$i-exited"
            start_server "$i" "${server_port[$i]}"
        fi
    done

    # A random point: client start-up, queuing, delivery; a server's start-up or a request.
    sleep "0.$(printf '%03d' $((50 + RANDOM % 400)))"
    victim=$((RANDOM % 3))
    if ((victim == 2)); then
        if [[ -n "$child_pid" ]] && kill_and_reap "$child_pid"; then
            note "client-kill"
            child_pid=""
            kills=$((kills + 1))
            client_kills=$((client_kills + 1))
        fi
    else
        i=$victim
        # Instances die one at a time: the other one must be serving (else the lab would measure
        # a full outage, not a failover).
        if ! accepts "${server_port[$((1 - i))]}"; then
            skipped=$((skipped + 1))
            continue
        fi
        kill_and_reap "${server_pid[$i]}" || true
        note "server$i-kill"
        start_server "$i" "${server_port[$i]}"
        kills=$((kills + 1))
        server_kills[$i]=$((server_kills[i] + 1))
    fi
done
kill_seconds=$((SECONDS - start))

# A last run, not killed, drains everything that is left; both servers up again first.
if [[ -n "$child_pid" ]]; then
    wait "$child_pid" 2>/dev/null || true
    child_pid=""
fi
for i in 0 1; do
    kill -0 "${server_pid[$i]}" 2>/dev/null || start_server "$i" "${server_port[$i]}"
    await_server "$i"
done
note "client-start final"
if ! timeout 180 "$bin" outbox drive --db "$work/app.sqlite" --server "$url" --count "$count" >>"$work/child.log" 2>&1; then
    echo "$lab: FAILED: the final drain did not finish cleanly"
    tail -20 "$work/child.log"
    "$bin" outbox status --db "$work/app.sqlite" || true
    exit 1
fi
"$bin" outbox status --db "$work/app.sqlite"

echo "$lab: $kills kills in $kill_seconds s (client $client_kills, server 0 ${server_kills[0]}, server 1 ${server_kills[1]}), $completed client runs ended on their own ($failed_runs with an error), $unexpected_exits unexpected server exits, $skipped server kills skipped while the other was down"
verify_status=0
"$bin" outbox verify --server "http://127.0.0.1:${server_port[0]}" --count "$count" | tee "$work/verify.txt" || verify_status=$?
lost=$(awk '/^lost:/ {print $2}' "$work/verify.txt")
duplicated=$(awk '/^duplicated:/ {print $2}' "$work/verify.txt")

stall=$(python3 "$(dirname "$0")/exactly_once_servers.py" stalls "$events" "$work/nginx/logs/access.log")
echo "$lab: $stall"
longest=$(echo "$stall" | grep -o 'longest stall [0-9.]* s' | head -1)
# nginx logs every upstream attempt that failed: a write cut off by a kill, or a connection
# refused by an instance that was down or still starting.
cut_off=$(grep -E 'prematurely closed|reset by peer|broken pipe' "$work/nginx/logs/error.log" | grep -c '"PUT ' || true)
refused=$(grep 'Connection refused' "$work/nginx/logs/error.log" | grep -c '"PUT ' || true)
resent=$(grep -c ' PUT 2.. .*statuses=[0-9]*, ' "$work/nginx/logs/access.log" || true)
echo "$lab: nginx: $cut_off writes cut off mid-request by a server kill, $refused refused by an instance that was down; $resent writes acknowledged by the second instance tried"

if ((verify_status != 0)); then
    echo "$lab: FAILED: lost or duplicated writes; what the database holds:"
    echo "-- keys applied more than once (key|count):"
    psql_lab -d crashlab -c "SELECT idempotencykey, count FROM record_effects WHERE count > 1 ORDER BY 1" || true
    echo "-- records written more than once (id|version):"
    psql_lab -d crashlab -c "SELECT id, version FROM records WHERE collection = 'crash' AND version > 1 ORDER BY 1" || true
    echo "-- numbers never applied:"
    psql_lab -d crashlab -c "SELECT n FROM generate_series(0, $count - 1) n WHERE NOT EXISTS (SELECT 1 FROM records WHERE collection = 'crash' AND id = n::text) ORDER BY 1" || true
    for id in $(psql_lab -d crashlab -c "SELECT id FROM records WHERE collection = 'crash' AND version > 1 ORDER BY 1 LIMIT 5" 2>/dev/null); do
        echo "-- nginx's log for record $id:"
        grep " /api/records/crash/$id " "$work/nginx/logs/access.log" || true
    done
    echo "-- server errors:"
    grep -hi 'error' "$work/server0.log" "$work/server1.log" | sort | uniq -c | sort -rn | head -20 || true
fi
echo "server crash lab: $kills kills (client $client_kills, server 0 ${server_kills[0]}, server 1 ${server_kills[1]}), $count writes, ${lost:-?} lost, ${duplicated:-?} duplicated, ${longest:-longest stall unknown} with a client sending, $((SECONDS - start)) s"
exit "$verify_status"
