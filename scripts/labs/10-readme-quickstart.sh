#!/usr/bin/env bash
# The README's walkthrough (Examples/QuickStart), built and run as a newcomer would run it,
# against the reference server with its demo accounts: it must print what the README says.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

bin=${OFFLINEKIT_BIN:-$PWD/.build/debug/offline}

# The README shows the example's code itself, not a copy that could drift.
shown=$(sed -n '/<!-- quickstart-code -->/,/<!-- \/quickstart-code -->/p' README.md | sed '1,2d;$d' | sed '$d')
if [[ "$shown" != "$(cat Examples/QuickStart/QuickStart.swift)" ]]; then
    echo "quickstart: the README's code differs from Examples/QuickStart/QuickStart.swift"
    exit 1
fi
lines=$(grep -cvE '^\s*$|^\s*//' Examples/QuickStart/QuickStart.swift)
echo "quickstart: $lines lines of app code"
swift build --product QuickStart
work=$(mktemp -d /tmp/quickstart.XXXXXX)
trap 'kill "${server_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

start_offline_server quickstart "$work/server.log" --data "$work/data" --demo-accounts
timeout 120 .build/debug/QuickStart "$url" | tee "$work/out.txt"

# The README's "It prints:" block, between the markers, is the expected output.
expected=$(sed -n '/<!-- quickstart-output -->/,/<!-- \/quickstart-output -->/p' README.md | sed '1,2d;$d' | sed '$d')
if [[ "$(cat "$work/out.txt")" == "$expected" ]]; then
    echo "quickstart: printed what the README says ($(wc -l <"$work/out.txt") lines)"
else
    echo "quickstart: the README says"
    echo "$expected"
    exit 1
fi
