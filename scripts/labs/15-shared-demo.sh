#!/usr/bin/env bash
# The README's shared demo, as written: a server on PostgreSQL with the demo's accounts, the
# README's psql command run word for word (but for the database's URL), and one demo for ana and
# one for ben against that server: each must show the message psql wrote, in the chat of their
# shared workspace. Needs root (the PostgreSQL cluster runs as the postgres user).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=shared-demo
require_offline "$lab" root

work=$(mktemp -d /tmp/shared-demo.XXXXXX)
chmod 755 "$work"
server_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    stop_lab_postgres
    rm -rf "$work"
}
trap cleanup EXIT

block=$(sed -n '/<!-- shared-demo -->/,/<!-- \/shared-demo -->/p' README.md)
insert=$(grep -E '^psql "\$DATABASE_URL" -c ' <<<"$block" || true)
[[ -n "$insert" ]] || { echo "$lab: FAILED: the README's shared-demo block has no psql command"; exit 1; }
grep -qE '^swift run offline demo .*--user ben' <<<"$block" || { echo "$lab: FAILED: the README's shared-demo block runs no demo for ben"; exit 1; }
text=$(sed -nE "s/.*'([^']*)'\)\"$/\1/p" <<<"$insert")
[[ -n "$text" ]] || { echo "$lab: FAILED: no message text in the README's psql command"; exit 1; }

start_lab_postgres "$lab" "$work/pg" offlinekit
start_offline_server "$lab" "$work/server.log" --postgres "$pg_url" --demo-accounts
export DATABASE_URL=$pg_url
as_postgres env DATABASE_URL="$DATABASE_URL" PATH="$pg_bin:$PATH" bash -c "$insert" >"$work/psql.log" 2>&1 \
    || { echo "$lab: FAILED: the README's psql command"; cat "$work/psql.log"; exit 1; }
for user in ana ben; do
    if ! timeout 120 "$bin" demo --server "$url" --user "$user" --data "$work/$user" --keys "4 until:${text// /_}" >"$work/$user.txt" 2>&1; then
        echo "$lab: FAILED: $user's chat never showed \"$text\""
        tail -30 "$work/$user.txt"
        exit 1
    fi
    echo "$lab: $user's chat shows: $(grep -m1 -F "$text" "$work/$user.txt" | sed 's/^.*│ *>* *//')"
done
echo "$lab: passed"
