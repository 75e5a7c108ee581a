#!/usr/bin/env bash
# The README's examples (the quick start, connectivity, a synced list), as a newcomer would use
# them: Examples/QuickStart is a package of its own that adds OfflineKit as the README's
# Installation section says, so it compiles against OfflineKit's public API only. It is built
# with no warning allowed in what it compiles, then run against the reference server with its
# demo accounts: each example must print what the README says it prints.
#
# It builds in OfflineKit's own build folder (.build) by default: the dependencies compile with
# the same commands there, so the package's build already made them (SwiftNIO, AsyncHTTPClient,
# GRDB and two copies of BoringSSL took over 6 minutes of a clean-clone CI run), and OfflineKit's
# own sources were checked for warnings by that build. Set OFFLINEKIT_QUICKSTART_SCRATCH to an
# empty folder to build everything from nothing, as a new app's package does.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

bin=${OFFLINEKIT_BIN:-$PWD/.build/debug/offline}
example=Examples/QuickStart
work=$(mktemp -d /tmp/quickstart.XXXXXX)
trap 'kill "${server_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The README's block between <!-- NAME-code --> and <!-- /NAME-code --> (or -output), without
# the markers and the fence.
readme_block() {
    doc_block README.md "$1"
}
doc_block() {
    sed -n "/<!-- $2 -->/,/<!-- \/$2 -->/p" "$1" | sed '1,2d;$d' | sed '$d'
}
# The article that walks through the synced screen shows the same code and output.
article=Sources/OfflineKit/OfflineKit.docc/SyncedScreen.md

# The README shows the examples' code itself, not copies that could drift.
for name in QuickStart Connectivity SyncedChat; do
    source_file="$example/Sources/$name/$name.swift"
    marker=$(echo "$name" | tr '[:upper:]' '[:lower:]')
    if [[ "$(readme_block "$marker-code")" != "$(cat "$source_file")" ]]; then
        echo "quickstart: the README's $marker code differs from $source_file"
        exit 1
    fi
done
for part in code output; do
    if [[ "$(doc_block "$article" "syncedchat-$part")" != "$(readme_block "syncedchat-$part")" ]]; then
        echo "quickstart: $article's syncedchat-$part differs from the README's"
        exit 1
    fi
done
lines=$(grep -cvE '^\s*$|^\s*//' "$example/Sources/QuickStart/QuickStart.swift")
echo "quickstart: $lines lines of app code in the walkthrough"
synced=$(grep -cvE '^\s*$|^\s*//' "$example/Sources/SyncedChat/SyncedChat.swift")
echo "quickstart: $synced lines of app code in the synced screen"

scratch=${OFFLINEKIT_QUICKSTART_SCRATCH:-$PWD/.build}
started=$SECONDS
swift build --package-path "$example" --scratch-path "$scratch" 2>&1 | tee "$work/build.log"
test "${PIPESTATUS[0]}" -eq 0
root="$(pwd -P)/"
# Warnings in OfflineKit's sources or the examples' (a remote dependency's are not shown to an
# adopter's build, and a manifest's notes about other packages are not ours).
warnings=$(awk -v root="$root" 'index($0, root) == 1 && index($0, root ".build") != 1 && index($0, root "Examples/QuickStart/.build") != 1' \
    "$work/build.log" | grep -F ': warning: ' | sort -u || true)
count=$(printf '%s' "$warnings" | grep -c . || true)
compiled=$(grep -c '] Compiling ' "$work/build.log" || true)
echo "quickstart: the examples' package built in $((SECONDS - started)) s in $scratch ($compiled compile steps); warnings: $count in what it compiled"
if [[ "$count" -ne 0 ]]; then
    printf '%s\n' "$warnings"
    exit 1
fi
products="$scratch/debug"

start_offline_server quickstart "$work/server.log" --data "$work/data" --demo-accounts
for name in QuickStart Connectivity SyncedChat; do
    marker=$(echo "$name" | tr '[:upper:]' '[:lower:]')
    timeout 120 "$products/$name" "$url" | tee "$work/$name.txt"
    expected=$(readme_block "$marker-output")
    if [[ "$(cat "$work/$name.txt")" == "$expected" ]]; then
        echo "quickstart: $name printed what the README says ($(wc -l <"$work/$name.txt") lines)"
    else
        echo "quickstart: the README says $name prints"
        echo "$expected"
        exit 1
    fi
done
