"""Connectivity lab.

A client namespace joined by a veth pair to a server namespace that runs the reference backend's
health endpoint (`offline serve`). The real monitor runs in the client namespace as
`offline status --watch --json`, and the lab makes real faults and measures how long the monitor
takes to report each one:

- link down (`ip link set down`) -> offline-hard; link up -> online
- nftables drop toward the server (a blackhole) -> offline-soft, idle and with app traffic
- nftables reject -> offline-soft, and with app traffic within 1 s of the second failed request
- a tc tbf throttle to a few kbit/s -> poor, and no false offline while throttled
- each fault restored -> online
- an address removed and added again (a DHCP renew) -> no offline at all

It prints every latency and a summary against the targets, and fails when a fault is not
reported at all (within a generous bound), a throttled link is reported offline, or the app's
own refused requests take more than 1 s (p95) to make the status offline-soft. Other timings are
printed, not asserted. Only the two namespaces it creates are touched; they are removed at exit.
"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("OFFLINEKIT_BIN", os.path.join(ROOT, ".build", "debug", "offline"))
LINK_REPEATS = int(os.environ.get("LAB_LINK_REPEATS", "10"))
# Two fault rounds in CI (each about 44 s, most of it the 5 s anti-flap rule waited out four
# times); the table in docs/connectivity.md was measured with three.
REPEATS = int(os.environ.get("LAB_REPEATS", "2"))
SOAK = float(os.environ.get("LAB_SOAK_SECONDS", "20"))

TAG = str(os.getpid())
SERVER_NS, CLIENT_NS = f"okl-srv-{TAG}", f"okl-cli-{TAG}"
SERVER_IF, CLIENT_IF = f"oks{TAG}"[:15], f"okc{TAG}"[:15]
SERVER_IP, CLIENT_IP = "10.213.0.1", "10.213.0.2"
PORT = 8080
HEALTH = f"http://{SERVER_IP}:{PORT}/health"
SAMPLE = f"http://{SERVER_IP}:{PORT}/health/sample?bytes=4096"
EVENTS = f"http://{SERVER_IP}:{PORT}/api/sync/events"

processes = []


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def in_client(*args, check=True):
    return sh("ip", "netns", "exec", CLIENT_NS, *args, check=check)


def cleanup():
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
    for namespace in (CLIENT_NS, SERVER_NS):
        sh("ip", "netns", "del", namespace, check=False)


class Watcher:
    """One `offline status --watch --json` in the client namespace, its lines collected."""

    def __init__(self, name, *extra):
        self.name = name
        self.lines = []
        # Failed sample requests (`--log-requests`): {"request": outcome, "atUnix": seconds}.
        self.requests = []
        self.lock = threading.Condition()
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", CLIENT_NS, BIN, "status", "--watch", "--json",
             "--probe-url", HEALTH, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        processes.append(self.process)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            with self.lock:
                (self.requests if "request" in line else self.lines).append(line)
                self.lock.notify_all()

    def mark(self):
        with self.lock:
            return len(self.lines)

    def wait_for(self, status, after, limit):
        """The first line with `status` after index `after`, or None within `limit` seconds."""
        deadline = time.time() + limit
        with self.lock:
            while True:
                for line in self.lines[after:]:
                    if line["status"] == status:
                        return line
                remaining = deadline - time.time()
                if remaining <= 0:
                    return None
                self.lock.wait(remaining)

    def request_mark(self):
        with self.lock:
            return len(self.requests)

    def failed_requests(self, after):
        with self.lock:
            return list(self.requests[after:])

    def statuses(self, after=0):
        with self.lock:
            return [line["status"] for line in self.lines[after:]]

    def current(self):
        with self.lock:
            return self.lines[-1]["status"] if self.lines else None


results = {}
failures = []


def measure(labels, action, status, limit):
    """Performs `action` once and records, for each (label, watcher), the latency until that
    watcher reports `status`."""
    marks = [(label, watcher, watcher.mark()) for label, watcher in labels]
    started = time.time()
    action()
    for label, watcher, mark in marks:
        line = watcher.wait_for(status, mark, max(0.0, started + limit - time.time()))
        if line is None:
            failures.append(f"{label}: {watcher.name} did not report {status} within {limit} s "
                            f"(saw {watcher.statuses(mark)})")
            print(f"  {label:<36} {watcher.name:<8} -> NOT REPORTED ({status})")
            continue
        latency = max(0.0, line["sinceUnix"] - started)
        results.setdefault(label, []).append(latency)
        print(f"  {label:<36} {watcher.name:<8} -> {status:<12} {latency:6.2f} s  reason {line['reason']}")


def link_down():
    in_client("ip", "link", "set", CLIENT_IF, "down")


def link_up():
    in_client("ip", "link", "set", CLIENT_IF, "up")
    in_client("ip", "route", "replace", "default", "via", SERVER_IP)


def nft_block(verdict):
    def apply():
        in_client("nft", "add", "table", "inet", "oklab")
        in_client("nft", "add", "chain", "inet", "oklab", "out",
                  "{ type filter hook output priority 0 ; policy accept ; }")
        rule = ["ip", "daddr", SERVER_IP, "tcp", "dport", str(PORT)] + verdict.split()
        in_client("nft", "add", "rule", "inet", "oklab", "out", *rule)
    return apply


def nft_restore():
    in_client("nft", "delete", "table", "inet", "oklab")


def throttle():
    # Server to client: the direction responses travel. tbf needs a burst of at least one MTU.
    sh("ip", "netns", "exec", SERVER_NS, "tc", "qdisc", "add", "dev", SERVER_IF, "root",
       "tbf", "rate", "16kbit", "burst", "1600", "latency", "3s")


def unthrottle():
    sh("ip", "netns", "exec", SERVER_NS, "tc", "qdisc", "del", "dev", SERVER_IF, "root")


def second_failure_to_offline(watcher, requests_mark, status_mark):
    """Records how long after the second failed app request the watcher reported offline-soft.

    A failure is stamped when the sample request returns, just after the monitor heard of it, so
    a status changed by that very failure shows as about 0 (it may print as -0.00)."""
    label = "2nd failed request -> offline-soft"
    failed = watcher.failed_requests(requests_mark)
    line = watcher.wait_for("offline-soft", status_mark, 0)
    if (len(failed) == 1 and line is not None and line["reason"] == "connection-refused"
            and line["sinceUnix"] >= failed[0]["atUnix"]):
        # The monitor's own probe, sent after the first refusal, was refused too before the app
        # sent a second request: offline-soft came before there was a second failure to time.
        results.setdefault(label, []).append(0.0)
        print(f"  {label:<36} {watcher.name:<8} -> offline-soft before a 2nd request, "
              f"{line['sinceUnix'] - failed[0]['atUnix']:.2f} s after the 1st, reason {line['reason']}")
        return
    if len(failed) < 2 or line is None:
        failures.append(f"{label}: {watcher.name} saw {len(failed)} failed requests, offline-soft {'not ' if line is None else ''}reported")
        print(f"  {label:<36} {watcher.name:<8} -> NOT MEASURED ({[f['request'] for f in failed]})")
        return
    second = failed[1]
    latency = line["sinceUnix"] - second["atUnix"]
    results.setdefault(label, []).append(max(0.0, latency))
    kinds = ",".join(f["request"] for f in failed[:2])
    print(f"  {label:<36} {watcher.name:<8} -> offline-soft {latency:6.2f} s  after {kinds}, reason {line['reason']}")


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    if os.geteuid() != 0:
        print("connectivity lab: needs root (network namespaces)", file=sys.stderr)
        return 1
    if not os.access(BIN, os.X_OK):
        print(f"connectivity lab: no offline binary at {BIN}", file=sys.stderr)
        return 1

    sh("ip", "netns", "add", SERVER_NS)
    sh("ip", "netns", "add", CLIENT_NS)
    sh("ip", "link", "add", CLIENT_IF, "netns", CLIENT_NS, "type", "veth", "peer", "name", SERVER_IF, "netns", SERVER_NS)
    for namespace, interface, address in ((SERVER_NS, SERVER_IF, SERVER_IP), (CLIENT_NS, CLIENT_IF, CLIENT_IP)):
        sh("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", interface)
        sh("ip", "-n", namespace, "link", "set", interface, "up")
        sh("ip", "-n", namespace, "link", "set", "lo", "up")
    sh("ip", "-n", CLIENT_NS, "route", "add", "default", "via", SERVER_IP)

    server = subprocess.Popen(["ip", "netns", "exec", SERVER_NS, BIN, "serve", "--host", SERVER_IP, "--port", str(PORT),
                               "--demo-accounts"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    processes.append(server)
    for _ in range(100):
        if in_client("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1", HEALTH, check=False).stdout == "204":
            break
        time.sleep(0.1)
    else:
        print("connectivity lab: the server did not answer its health endpoint", file=sys.stderr)
        return 1

    # Idle: probes only, one per 1.5 s while online, 3 s timeout (the default).
    idle = Watcher("idle", "--interval", "1.5", "--timeout", "3")
    # With app traffic: small requests four times a second, each allowed 1 s.
    busy = Watcher("traffic", "--interval", "1.5", "--timeout", "3",
                   "--sample-url", SAMPLE, "--sample-interval", "0.25", "--sample-timeout", "1", "--log-requests")
    # Syncing: probes, and the sync event stream held open (its attempts while offline-soft are
    # evidence too).
    stream = Watcher("stream", "--interval", "1.5", "--timeout", "3", "--events-url", EVENTS)
    for watcher in (idle, busy, stream):
        if watcher.wait_for("online", 0, 15) is None:
            failures.append(f"{watcher.name}: never online on a healthy link")
    print(f"connectivity lab: client {CLIENT_NS} -> server {SERVER_NS}, {LINK_REPEATS} link rounds, {REPEATS} fault rounds")

    def settle_soft():
        # Stay in the fault long enough that recovery is not held back by the 5 s anti-flap rule.
        time.sleep(6)

    for round_ in range(LINK_REPEATS):
        print(f" link round {round_ + 1}")
        measure([("link down -> offline-hard", idle), ("link down -> offline-hard", busy)], link_down, "offline-hard", 10)
        time.sleep(0.5)
        measure([("link up -> online", idle), ("link up -> online", busy)], link_up, "online", 15)
        time.sleep(1)
    time.sleep(5)

    # A DHCP renew: the address (and with it the routes) removed and added again at once.
    print(" address renew")
    marks = [(watcher, watcher.mark()) for watcher in (idle, busy)]
    for _ in range(3):
        in_client("ip", "addr", "del", f"{CLIENT_IP}/24", "dev", CLIENT_IF)
        in_client("ip", "addr", "add", f"{CLIENT_IP}/24", "dev", CLIENT_IF)
        in_client("ip", "route", "replace", "default", "via", SERVER_IP)
        time.sleep(1)
    time.sleep(3)
    for watcher, mark in marks:
        seen = [status for status in watcher.statuses(mark) if status.startswith("offline")]
        print(f"  address renewed 3 times              {watcher.name:<8} -> offline transitions: {len(seen)}")
        if seen:
            failures.append(f"address renew: {watcher.name} reported {seen}")
    time.sleep(2)

    for round_ in range(REPEATS):
        print(f" fault round {round_ + 1}")
        measure([("blackhole -> offline-soft (traffic)", busy), ("blackhole -> offline-soft (idle)", idle),
                 ("blackhole -> offline-soft (stream)", stream)],
                nft_block("drop"), "offline-soft", 20)
        settle_soft()
        measure([("blackhole restored -> online", idle), ("blackhole restored -> online", busy),
                 ("blackhole restored -> online (stream)", stream)], nft_restore, "online", 90)
        time.sleep(6)
        requests_mark, status_mark = busy.request_mark(), busy.mark()
        measure([("reject -> offline-soft", idle), ("reject -> offline-soft", busy), ("reject -> offline-soft (stream)", stream)],
                nft_block("reject with tcp reset"), "offline-soft", 20)
        second_failure_to_offline(busy, requests_mark, status_mark)
        settle_soft()
        measure([("reject restored -> online", idle), ("reject restored -> online", busy),
                 ("reject restored -> online (stream)", stream)], nft_restore, "online", 90)
        time.sleep(6)

    # Throttle: a fresh watcher whose sample requests (4 KB, 5 s allowed) measure throughput.
    idle.process.terminate()
    busy.process.terminate()
    stream.process.terminate()
    # 4 KB every 3 s is about 11 kbit/s: traffic the throttled link can carry, slowly.
    throttled = Watcher("throttle", "--interval", "1.5", "--timeout", "5",
                        "--sample-url", SAMPLE, "--sample-interval", "3", "--sample-timeout", "8")
    if throttled.wait_for("online", 0, 15) is None:
        failures.append("throttle watcher: never online on a healthy link")
    print(" throttle")
    measure([("throttle 16 kbit/s -> poor", throttled)], throttle, "poor", 60)
    mark = throttled.mark()
    print(f"  soaking {SOAK:.0f} s on the throttled link")
    time.sleep(SOAK)
    false_offline = [status for status in throttled.statuses(mark) if status.startswith("offline")]
    print(f"  false offline transitions while throttled: {len(false_offline)} in {SOAK:.0f} s")
    if false_offline:
        failures.append(f"throttled link reported {false_offline}")
    measure([("throttle removed -> online", throttled)], unthrottle, "online", 60)

    print("\nconnectivity lab summary (seconds; targets from the product requirements)")
    targets = {
        "link down -> offline-hard": ("p95", 1.0),
        "2nd failed request -> offline-soft": ("p95", 1.0),
        "blackhole -> offline-soft (idle)": ("max", 8.0),
        "blackhole -> offline-soft (traffic)": ("max", 3.0),
        "link up -> online": ("max", 2.0),
        "blackhole restored -> online": ("max", 2.0),
        "reject restored -> online": ("max", 2.0),
        "blackhole restored -> online (stream)": ("p95", 2.0),
        "reject restored -> online (stream)": ("p95", 2.0),
    }
    # Asserted, not only printed: the app's own failures must show the banner within a second.
    asserted = {"2nd failed request -> offline-soft"}
    for label, values in results.items():
        summary = f"n={len(values)} p50={statistics.median(values):.2f} p95={percentile(values, 0.95):.2f} max={max(values):.2f}"
        if label in targets:
            kind, bound = targets[label]
            value = percentile(values, 0.95) if kind == "p95" else max(values)
            summary += f"  target {kind} <= {bound:.0f}: {'met' if value <= bound else 'NOT met'}"
            if label in asserted and value > bound:
                failures.append(f"{label}: {kind} {value:.2f} s is over {bound:.0f} s")
        print(f"  {label:<36} {summary}")
    if failures:
        print("\nconnectivity lab FAILED:")
        for failure in failures:
            print(f"  {failure}")
        return 1
    print("connectivity lab: every fault was reported")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        cleanup()
