#!/usr/bin/env bash
# Attack lab: what one party can take from everyone else, and what a hostile server can make
# the client do (the cases of "Hostile on both sides").
#
# The server half, against `offline serve` on loopback (scripts/labs/server_attacks.py has the
# settings): 300 readers that never read (case 1), one account opening 200 live streams (2),
# PATCHes growing a record (3), records up to the quota and the list a page at a time (4), two
# refreshes of one token at once (5), 16 clients flooding sign-in from another address (6), a
# stream's answers to another user's writes, cursors, Host and scheme (7); meanwhile another
# user's /health, sign-in and pack reads are timed and the server's memory sampled.
#
# The client half (cases 8-11), against servers on loopback that redirect, lie and flood:
# HostileServerTests, whose figures are the lines starting "hostile-lab:".
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=server-attacks
require_offline "$lab"
work=$(mktemp -d /tmp/server-attacks.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
python3 scripts/labs/server_attacks.py --bin "$bin" --work "$work"
echo "$lab: the client against hostile servers (cases 8-11)"
OFFLINEKIT_INTEGRATION=1 swift test --skip-build --filter HostileServerTests > "$work/client.log" 2>&1 || client=$?
grep -E "hostile-lab:|✘|Test run" "$work/client.log" || true
if [[ "${client:-0}" -ne 0 ]]; then
    echo "$lab: FAILED: the client half (swift test exited ${client})"
    exit 1
fi
echo "$lab: $((SECONDS - start)) s"
