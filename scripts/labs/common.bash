# Shared by the kill labs (sourced, not run: the labs are the *.sh files beside it).

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
