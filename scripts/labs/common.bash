# Shared by the kill labs (sourced, not run: the labs are the *.sh files beside it).

# Sets `bin` to the `offline` binary (OFFLINEKIT_BIN, or the debug build) and exits unless it is
# there; with `root`, also unless the lab runs as root (PostgreSQL runs as the postgres user).
#   require_offline LAB [root]
require_offline() {
    bin=${OFFLINEKIT_BIN:-$PWD/.build/debug/offline}
    [[ -x "$bin" ]] || { echo "$1: no offline binary at $bin (swift build --product offline)"; exit 1; }
    if [[ ${2:-} == root && $(id -u) -ne 0 ]]; then
        echo "$1: needs root (PostgreSQL runs as the postgres user)"
        exit 1
    fi
}

# Starts `offline serve --port 0 ARGS…` logging to LOG, and waits until it listens: sets
# `server_pid` and `url` (http://127.0.0.1:PORT), or prints the log and exits.
#   start_offline_server LAB LOG ARGS…
start_offline_server() {
    local lab=$1 log=$2
    shift 2
    "$bin" serve --port 0 "$@" >"$log" 2>&1 &
    server_pid=$!
    url=""
    for _ in $(seq 1 100); do
        # Hummingbird logs the bound address (stdout may be buffered).
        local address
        address=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | head -1 | awk '{print $3}' || true)
        [[ -n "$address" ]] && url="http://$address" && return 0
        sleep 0.1
    done
    echo "$lab: the server did not start"
    cat "$log"
    exit 1
}

# Runs COMMAND… in the background (output appended to LOG) and SIGKILLs it after a random
# 0 to MAX_MS milliseconds. Returns 0 when it was killed, 1 when it had already ended on its
# own. `child_pid` names it meanwhile, for the lab's cleanup.
#   kill_at_random MAX_MS LOG COMMAND…
kill_at_random() {
    local max_ms=$1 log=$2 killed=1
    shift 2
    "$@" >>"$log" 2>&1 &
    child_pid=$!
    sleep "0.$(printf '%03d' $((RANDOM % max_ms)))"
    kill -9 "$child_pid" 2>/dev/null && killed=0
    wait "$child_pid" 2>/dev/null || true
    child_pid=""
    return $killed
}

# A throwaway PostgreSQL cluster under FOLDER (created here), as the postgres user, on a free port
# of 30000..59999, with database DB. Durability settings are off: the labs kill servers and
# clients, never PostgreSQL. `wal_level = logical`: the server's sync capture reads the WAL
# through a logical replication slot, and the server does not start without it. Sets `pg_bin`,
# `pg_port`, `pg_url` (postgres://…/DB) and `pg_folder`; `stop_lab_postgres` stops it (call it
# from the lab's cleanup). Needs root.
#   start_lab_postgres LAB FOLDER DB
start_lab_postgres() {
    local lab=$1 db=$3
    pg_folder=$2
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [[ -x "$pg_bin/initdb" ]] || { echo "$lab: no PostgreSQL under /usr/lib/postgresql (scripts/setup.sh installs it)"; exit 1; }
    mkdir -p "$pg_folder"
    chown postgres "$pg_folder"
    as_postgres "$pg_bin/initdb" -D "$pg_folder/data" -A trust -U postgres -N >"$pg_folder/initdb.log" 2>&1 \
        || { echo "$lab: initdb failed"; cat "$pg_folder/initdb.log"; exit 1; }
    pg_port=""
    local port
    for _ in 1 2 3 4 5; do
        port=$((30000 + RANDOM % 30000))
        if as_postgres "$pg_bin/pg_ctl" -D "$pg_folder/data" -l "$pg_folder/log" -w \
            -o "-p $port -k $pg_folder -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200 -c wal_level=logical" \
            start >/dev/null 2>&1; then
            pg_port=$port
            break
        fi
    done
    [[ -n "$pg_port" ]] || { echo "$lab: PostgreSQL did not start"; cat "$pg_folder/log" 2>/dev/null; exit 1; }
    psql_lab -c "CREATE DATABASE $db"
    pg_url="postgres://postgres@127.0.0.1:$pg_port/$db"
}

stop_lab_postgres() {
    [[ -n "${pg_port:-}" ]] && as_postgres "$pg_bin/pg_ctl" -D "$pg_folder/data" -m immediate -w stop >/dev/null 2>&1 || true
}

# From /, which the postgres user can always enter, whatever folder the lab was started in.
as_postgres() { (cd / && runuser -u postgres -- "$@"); }
psql_lab() { as_postgres "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -X -q -At "$@"; }
