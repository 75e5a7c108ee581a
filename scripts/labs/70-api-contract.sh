#!/usr/bin/env bash
# API contract lab: the reference server against its published contract
# (Sources/OfflineServer/openapi.json), tested by schemathesis with every check it has: status
# codes, content types, headers and bodies as documented; valid requests served and invalid ones
# refused; required headers and credentials enforced; 405 and Allow for undeclared methods;
# stateful sequences through the document's links; one user never reading what another made.
# Signed in as ana (and ben, her peer), with a fixed seed and a fixed number of cases per
# operation, so a run is repeatable; any failure fails the lab.
#
# Two runs: every operation but sign-out, then sign-out alone, signed in anew (it ends the
# session of the token it carries). The client behaviour the document asks for in words
# (a new key per write, no control characters in bodies, invitations of people not yet members,
# no made-up sync cursor) is in api_contract_hooks.py; the settings are in api-contract.toml.
#
#   API_CONTRACT_EXAMPLES   cases per operation (default 60)
#   OFFLINEKIT_BIN          the `offline` binary (default .build/debug/offline)
#   SCHEMATHESIS            the schemathesis command (default: the one scripts/setup.sh installs)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=api-contract
require_offline "$lab"
schemathesis=${SCHEMATHESIS:-/opt/offlinekit/schemathesis-4.32.5/bin/schemathesis}
examples=${API_CONTRACT_EXAMPLES:-60}
[[ -x "$schemathesis" ]] || { echo "$lab: no schemathesis at $schemathesis (scripts/setup.sh installs it)"; exit 1; }

# The fault switch changes how the server answers every other request (a random rule could slow
# or cut any route), so it is never exercised beside them; its routes have their own tests.
excluded_paths=(
    /_faults/routes
    /_faults/packs
)

work=$(mktemp -d /tmp/api-contract.XXXXXX)
server_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
# With the lab routes (`--faults`), and packs seeded into a folder of the lab's own.
start_offline_server "$lab" "$work/server.log" --demo-accounts --faults --packs "$work/packs"

# NAME ARGS…: one schemathesis run, from the lab's folder (Hypothesis keeps nothing between runs:
# no example database). It signs in as the lab's users itself (api-contract-users.yaml). One
# worker: with two threads, Hypothesis's concurrent `ast.parse` of its lambdas once failed the
# run with CPython's "AST constructor recursion depth mismatch" (python/cpython#106905), an error
# of the tool's interpreter and not of the server.
contract_run() {
    local name=$1 root=$PWD labs=$PWD/scripts/labs
    shift
    echo "$lab: $name"
    (cd "$work" && API_CONTRACT_USERS="$labs/api-contract-users.yaml" SCHEMATHESIS_HOOKS=api_contract_hooks PYTHONPATH="$labs" \
        "$schemathesis" --config-file "$labs/api-contract.toml" run "$root/Sources/OfflineServer/openapi.json" \
        --url "$url" --seed 1 --max-examples "$examples" --workers 1 --request-timeout 5 \
        --generation-database none --continue-on-failure --no-color "$@")
}

exclusions=()
for path in "${excluded_paths[@]}"; do exclusions+=(--exclude-path "$path"); done
status=0
contract_run "every operation but sign-out" "${exclusions[@]}" --exclude-path /api/auth/sign-out || status=$?
contract_run "sign-out" --include-path /api/auth/sign-out || status=$?

if ((status != 0)); then
    echo "$lab: FAILED: the server and openapi.json disagree (above); server log:"
    tail -20 "$work/server.log"
fi
echo "api contract lab: ${#excluded_paths[@]} paths left out, $((SECONDS - start)) s"
exit "$status"
