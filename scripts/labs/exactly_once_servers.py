#!/usr/bin/env python3
"""Figures for the exactly-once server crash lab (40-exactly-once-servers.sh).

    exactly_once_servers.py stalls EVENTS ACCESS_LOG

EVENTS holds "EPOCH.FRACTION what" lines written by the lab (client-start, client-kill,
serverN-kill, ...); ACCESS_LOG is nginx's log, one "MSEC METHOD STATUS URI ..." line per request,
written when the response was sent. A write is acknowledged when nginx answered a PUT with 2xx.

The stall after a server kill is the time from the kill until the next acknowledged write. It
says something about the servers only when a client was sending the whole time, so kills followed
by a client kill or a new client run before the next acknowledgement are reported apart.
"""
import bisect
import statistics
import sys


def read_events(path):
    events = []
    with open(path) as file:
        for line in file:
            parts = line.split()
            if len(parts) >= 2:
                events.append((float(parts[0]), parts[1]))
    return events


def read_acks(path):
    acks = []
    with open(path) as file:
        for line in file:
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "PUT" and parts[2].startswith("2"):
                acks.append(float(parts[0]))
    acks.sort()
    return acks


def stalls(events_path, access_path):
    events = read_events(events_path)
    acks = read_acks(access_path)
    client_changes = sorted(t for t, what in events if what in ("client-start", "client-kill"))
    clean, disturbed = [], []
    for kill_time, what in events:
        if not (what.startswith("server") and what.endswith("-kill")):
            continue
        index = bisect.bisect_right(acks, kill_time)
        if index == len(acks):
            continue
        ack = acks[index]
        # Did the client restart (or get killed) between the kill and the acknowledgement?
        changed = bisect.bisect_right(client_changes, kill_time) < bisect.bisect_right(client_changes, ack)
        (disturbed if changed else clean).append(ack - kill_time)
    if not clean:
        return "no server kill was followed by an acknowledged write from a running client"
    line = (f"longest stall {max(clean):.2f} s after a server kill "
            f"(median {statistics.median(clean):.2f} s over {len(clean)} kills with a client sending")
    if disturbed:
        line += f"; {len(disturbed)} more with a client restart in between, longest {max(disturbed):.2f} s"
    return line + ")"


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "stalls":
        print(stalls(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
