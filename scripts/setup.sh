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
    python3-venv  # the API contract lab's schemathesis, in a venv of its own (below)
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

# The API contract lab's schemathesis (PyPI), at the versions scripts/labs/api-contract-requirements.txt
# pins, in a venv of its own: Debian's python3 takes no packages from pip outside one. Made once
# per version; a run that finds it in place does nothing.
schemathesis_venv=/opt/offlinekit/schemathesis-4.32.5
if ! "$schemathesis_venv/bin/schemathesis" --version 2>/dev/null | grep -qx 'schemathesis, version 4.32.5'; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: schemathesis missing at $schemathesis_venv; run as root to install it" >&2
        exit 1
    fi
    echo "setup: installing schemathesis into $schemathesis_venv"
    rm -rf "$schemathesis_venv"
    python3 -m venv "$schemathesis_venv"
    "$schemathesis_venv/bin/pip" install --quiet --disable-pip-version-check \
        -r "$(dirname "$0")/labs/api-contract-requirements.txt"
fi
