#!/usr/bin/env bash
# Fuzzes the parsers a hostile peer reaches, with libFuzzer (`swiftc -sanitize=fuzzer`, part of
# the Swift toolchain on Linux): on the client, the sync page reader, the server-sent event
# parser, the pack manifest reader, and the response headers the cache and the outbox read; on
# the server, the request body reader every write route uses, the sync cursor every pull reads and
# the Idempotency-Key field every write carries. Each target in Fuzz/ is a harness
# and a seed corpus; the harness is compiled with its own source files from Sources/ (internal
# types stay internal) and OfflineCore, all instrumented and
# under AddressSanitizer, then run for SECONDS. Inputs found meanwhile go to
# .build/fuzz/NAME/corpus, never into the repository's seeds.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]    30 s for each target by default; every target by default
#
# Fails when a target crashes or breaks one of its checks; the input that did it is left in
# .build/fuzz/NAME/ (crash-…, timeout-…, oom-…): run the target on it to see it again
# (`.build/fuzz/NAME/fuzz FILE`).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
shift || true
targets=("$@")
all=(SyncPage ServerSentEvents PackManifest ResponseHeaders RequestJSON SyncCursor IdempotencyKey)
((${#targets[@]})) || targets=("${all[@]}")

# The source files each harness is compiled with, besides OfflineCore.
sources_of() {
    case $1 in
        SyncPage) echo Sources/OfflineKit/Sync/SyncPage.swift ;;
        ServerSentEvents) echo Sources/OfflineKit/Sync/ServerSentEvents.swift ;;
        PackManifest) echo "" ;;
        ResponseHeaders) echo Sources/OfflineKit/Cache/CacheControl.swift ;;
        RequestJSON) echo Sources/OfflineServer/Application/JSONValue.swift ;;
        SyncCursor) echo Sources/OfflineServer/Sync/SyncCursor.swift Sources/OfflineServer/Application/Base64URL.swift ;;
        IdempotencyKey) echo Sources/OfflineServer/Idempotency/IdempotencyKeyField.swift ;;
        *) echo "fuzz: no target $1 (targets: ${all[*]})" >&2; exit 2 ;;
    esac
}

# The libraries each harness links besides OfflineCore, built below: `-I DIR LIBRARY` pairs.
libraries_of() {
    case $1 in
        IdempotencyKey) echo "-I $out/sfv $out/sfv/libRawStructuredFieldValues.a" ;;
        *) echo "" ;;
    esac
}

out=.build/fuzz
flags=(-O -sanitize=fuzzer,address -parse-as-library -package-name OfflineKit)
mkdir -p "$out/core"
# The linker warns about symbols of the sanitizers' runtime it cannot export: noise, not ours.
quiet() { grep -v "Cannot export local symbol" || true; }

start=$SECONDS
# OfflineCore, and swift-http-structured-headers' parser (the server reads Idempotency-Key with
# it; its sources are the package's checkout, there once `swift build` resolved it), side by side.
sfv=.build/checkouts/swift-http-structured-headers/Sources/RawStructuredFieldValues
[[ -d $sfv ]] || { echo "fuzz: no $sfv: run swift build first" >&2; exit 1; }
mkdir -p "$out/sfv"
library() {
    local name=$1 dir=$2
    shift 2
    swiftc "${flags[@]}" -module-name "$name" -emit-module -emit-module-path "$dir/$name.swiftmodule" \
        -emit-library -static -o "$dir/lib$name.a" "$@" 2>&1 | quiet
    test "${PIPESTATUS[0]}" -eq 0
}
mapfile -t core < <(find Sources/OfflineCore -name '*.swift' | sort)
# With the package's own settings for it (Package.swift's `strict`): its imports are internal
# unless marked, and it says `package import` where only package declarations need a module.
library OfflineCore "$out/core" -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
    "${core[@]}" &
library RawStructuredFieldValues "$out/sfv" "$sfv"/*.swift &
wait -n && wait -n || { echo "fuzz: a library did not build" >&2; exit 1; }

# The targets are built, then run, as many at a time as the machine has cores: each build and
# each libFuzzer run uses one. `each FUNCTION` runs FUNCTION NAME for every target and leaves
# its status in $out/NAME/FUNCTION.status.
width=$(nproc)
each() {
    local name
    for name in "${targets[@]}"; do
        while (($(jobs -rp | wc -l) >= width)); do wait -n || true; done
        (if "$1" "$name"; then echo 0; else echo 1; fi >"$out/$name/$1.status") &
    done
    wait
}

build() {
    local name=$1 own libraries
    read -r -a own <<<"$(sources_of "$name")"
    read -r -a libraries <<<"$(libraries_of "$name")"
    # Archives after the objects that use them, as the linker reads them in order.
    swiftc "${flags[@]}" -module-name "${name}Fuzz" -I "$out/core" -o "$out/$name/fuzz" \
        Fuzz/"$name"/*.swift "${own[@]}" "$out/core/libOfflineCore.a" "${libraries[@]}" >"$out/$name/build.log" 2>&1
}

# New inputs go to the first folder; the seeds are only read. Leaks are not looked for, neither
# after each input (-detect_leaks=0) nor when the run ends (AddressSanitizer's own check,
# ASAN_OPTIONS): Foundation's DateFormatter keeps a character set for good on first use (128
# bytes, reported as a leak at exit); memory that grows is caught by -rss_limit_mb instead.
fuzz() {
    local name=$1
    ASAN_OPTIONS=detect_leaks=0 "$out/$name/fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -detect_leaks=0 -print_final_stats=1 \
        -artifact_prefix="$out/$name/" "$out/$name/corpus" "Fuzz/$name/corpus" >"$out/$name/log" 2>&1
}

for name in "${targets[@]}"; do mkdir -p "$out/$name/corpus"; done
each build
for name in "${targets[@]}"; do
    if [[ $(cat "$out/$name/build.status") != 0 ]]; then
        echo "fuzz: $name did not build:"
        quiet <"$out/$name/build.log"
        exit 1
    fi
done
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s, $width at a time"

start=$SECONDS
each fuzz
failed=()
for name in "${targets[@]}"; do
    log="$out/$name/log"
    if [[ $(cat "$out/$name/fuzz.status") == 0 ]]; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
        inputs=$(find "$out/$name/corpus" -type f | wc -l)
        echo "fuzz: $name: $runs runs in $seconds s, no crash ($inputs inputs in its corpus)"
    else
        echo "fuzz: $name FAILED:"
        grep -v "Cannot export local symbol" "$log" | tail -40
        failed+=("$name")
    fi
done
echo "fuzz: ran ${#targets[@]} targets in $((SECONDS - start)) s, $width at a time"
((${#failed[@]} == 0)) || { echo "fuzz: ${#failed[@]} targets failed: ${failed[*]}"; exit 1; }
