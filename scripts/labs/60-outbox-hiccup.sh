#!/usr/bin/env bash
# A server hiccup and the queue it leaves: two `offline serve` instances over one PostgreSQL
# database behind nginx, which answers 502 while both are down. A client that runs as an app does
# (`offline outbox follow`: a connectivity monitor probing /health, and a drainer) has writes queued
# while both instances are down, which fail and back off; then both come back. Over several such
# hiccups the lab times how long the queue takes to empty once both instances answer /health
# again, and fails if any took longer than OUTBOX_HICCUP_LIMIT seconds or a write was lost or
# applied twice. See outbox_hiccup.py for the steps and the settings.
#
# Needs root (the PostgreSQL cluster runs as the `postgres` user), Debian's postgresql and nginx.
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/labs/common.bash

lab=outbox-hiccup
require_offline "$lab" root
command -v nginx >/dev/null || { echo "$lab: no nginx (scripts/setup.sh installs it)"; exit 1; }

work=$(mktemp -d /tmp/outbox-hiccup.XXXXXX)
chmod 755 "$work"
cleanup() {
    stop_lab_postgres
    rm -rf "$work"
}
trap cleanup EXIT

start_lab_postgres "$lab" "$work/pg" hiccuplab
python3 scripts/labs/outbox_hiccup.py --bin "$bin" --postgres "$pg_url" --work "$work"
