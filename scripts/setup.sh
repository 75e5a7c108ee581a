#!/usr/bin/env bash
# Installs the system packages the integration tests and labs need (Debian), when missing.
# Safe to run repeatedly; does nothing for packages already present.
set -euo pipefail

packages=(
    iproute2      # ip netns, veth, tc: the connectivity lab
    nftables      # drop/reject faults in the connectivity lab
    nginx         # packs served by a plain web server
    postgresql    # shared idempotency keys across server instances
    curl          # baseline for download benchmarks, lab health checks
    wrk           # load generator of the server benchmark
    tmux          # terminal test of the demo
    sqlite3       # inspecting databases in labs
    procps        # pkill/pgrep in labs
    elfutils      # eu-stack: thread stacks when a test finds the demo or the test process stuck
)

missing=()
for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing packages ${missing[*]}; run as root to install them" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian nginx and postgresql packages try to start system services; the tests start
# their own instances on free loopback ports instead.
service nginx stop >/dev/null 2>&1 || true
