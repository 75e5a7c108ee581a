#!/usr/bin/env bash
# The connectivity lab: real link, blackhole, reject and bandwidth faults between two network
# namespaces, observed by the real monitor (`offline status --watch --json`). Needs root.
set -euo pipefail
exec python3 "$(dirname "$0")/connectivity_lab.py" "$@"
