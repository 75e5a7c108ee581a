#!/usr/bin/env bash
# Server attack lab: what one party can take from everyone else. Against `offline serve` on
# loopback: 300 readers that never read, one account opening 200 live streams, 16 clients
# flooding sign-in with wrong names; meanwhile another user's /health, sign-in and pack reads are
# timed and the server's memory sampled (scripts/labs/server_attacks.py has the settings). Fails
# when another user's /health p99 passes 50 ms, memory passes 128 MiB above idle under the slow
# readers, one account holds more than 8 streams, or the sign-in flood slows pack reads.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=server-attacks
require_offline "$lab"
work=$(mktemp -d /tmp/server-attacks.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
python3 scripts/labs/server_attacks.py --bin "$bin" --work "$work"
echo "$lab: $((SECONDS - start)) s"
