#!/usr/bin/env python3
"""The outbox hiccup lab (60-outbox-hiccup.sh): how soon a queue left by a server outage empties
once the server answers again.

    outbox_hiccup.py --bin OFFLINE --postgres URL --work FOLDER

Starts two `offline serve` instances on one PostgreSQL database, nginx in front of both (502 when
neither answers), and one client, `offline outbox follow`, through nginx. Then, HICCUPS times:
both instances are SIGKILLed; writes are queued (some at once, some midway), sent, refused with
502 and left to back off; after the outage both instances are started again. The figure of a
hiccup is the time from the moment both answer GET /health (polled directly, every 20 ms) to the
moment the client reports its queue empty. At the end the server's count of applied writes must
show none lost and none applied twice.

Settings (environment):
    OUTBOX_HICCUPS          hiccups (default 4)
    OUTBOX_HICCUP_SECONDS   how long both instances stay down (default 8; the client's monitor
                            holds a verdict at least 5 s, so shorter outages measure that instead)
    OUTBOX_HICCUP_WRITES    writes queued per hiccup (default 30)
    OUTBOX_HICCUP_LIMIT     the longest time allowed from both answering to an empty queue
                            (default 2 s)
    OUTBOX_HICCUP_VERBOSE   set: print what the client reported during each hiccup (its
                            connectivity status, its queue), timed from both answering
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

LAB = "outbox-hiccup"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def answers_health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as response:
            return 200 <= response.status < 300
    except Exception:
        return False


def acknowledged_writes(access_log):
    """The times nginx answered a PUT with 2xx (its log has one "MSEC METHOD STATUS ..." line per request)."""
    times = []
    try:
        with open(access_log) as file:
            for line in file:
                parts = line.split()
                if len(parts) >= 3 and parts[1] == "PUT" and parts[2].startswith("2"):
                    times.append(float(parts[0]))
    except FileNotFoundError:
        pass
    return times


def fail(message):
    print(f"{LAB}: FAILED: {message}", flush=True)
    sys.exit(1)


class Client:
    """`offline outbox follow`: its stdout lines are collected with the times it printed."""

    def __init__(self, bin, db, url, log):
        self.process = subprocess.Popen(
            [bin, "outbox", "follow", "--db", db, "--server", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
        self.lines = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            parts = line.split()
            with self.changed:
                self.lines.append((parts[0], float(parts[-1]), " ".join(parts[:-1])))
                self.changed.notify_all()
        with self.changed:
            self.lines.append(("exit", time.time(), "exit"))
            self.changed.notify_all()

    def queue(self, count):
        """Queues `count` writes; returns when the client has committed them."""
        with self.changed:
            seen = len(self.lines)
        self.process.stdin.write(f"queue {count}\n")
        self.process.stdin.flush()
        self.wait_for("queued", after=seen, timeout=30)

    def wait_for(self, what, after, timeout):
        """The time of the first `what` line after line `after`, waiting up to `timeout` s."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for name, at, _ in self.lines[after:]:
                    if name == what:
                        return at
                    if name == "exit":
                        fail(f"the client exited while waiting for '{what}'")
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)

    def mark(self):
        with self.changed:
            return len(self.lines)

    def stop(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    hiccups = int(os.environ.get("OUTBOX_HICCUPS", "4"))
    outage = float(os.environ.get("OUTBOX_HICCUP_SECONDS", "8"))
    writes = int(os.environ.get("OUTBOX_HICCUP_WRITES", "30"))
    limit = float(os.environ.get("OUTBOX_HICCUP_LIMIT", "2"))
    work = args.work
    ports = [free_port(), free_port()]
    servers = [None, None]
    children = []

    def start_server(i):
        log = open(f"{work}/server{i}.log", "a")
        servers[i] = subprocess.Popen(
            [args.bin, "serve", "--postgres", args.postgres, "--port", str(ports[i]), "--demo-accounts", "--faults"],
            stdout=log, stderr=subprocess.STDOUT)

    def await_server(i):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if accepts(ports[i]):
                return
            if servers[i].poll() is not None:
                break
            time.sleep(0.05)
        print(open(f"{work}/server{i}.log").read()[-2000:])
        fail(f"server {i} did not start")

    def kill_server(i):
        servers[i].send_signal(signal.SIGKILL)
        servers[i].wait()

    nginx = None
    client = None
    try:
        # One at a time: two instances migrating an empty database at once would race.
        start_server(0)
        await_server(0)
        start_server(1)
        await_server(1)

        nginx_port = free_port()
        os.makedirs(f"{work}/nginx/logs", exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        with open(f"{work}/nginx/nginx.conf", "w") as conf:
            conf.write(f"""{user}
daemon off;
master_process on;
worker_processes 1;
pid {work}/nginx/nginx.pid;
error_log {work}/nginx/logs/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format writes '$msec $request_method $status $request_uri upstream=$upstream_addr statuses=$upstream_status';
    access_log {work}/nginx/logs/access.log writes;
    client_body_temp_path {work}/nginx/body;
    proxy_temp_path {work}/nginx/proxy;
    fastcgi_temp_path {work}/nginx/fastcgi;
    uwsgi_temp_path {work}/nginx/uwsgi;
    scgi_temp_path {work}/nginx/scgi;
    upstream offline {{
        server 127.0.0.1:{ports[0]} max_fails=0;
        server 127.0.0.1:{ports[1]} max_fails=0;
    }}
    server {{
        listen 127.0.0.1:{nginx_port};
        location / {{
            proxy_pass http://offline;
            proxy_next_upstream error timeout non_idempotent;
            proxy_next_upstream_tries 2;
            proxy_connect_timeout 1s;
            proxy_read_timeout 10s;
        }}
    }}
}}
""")
        nginx = subprocess.Popen(["nginx", "-p", f"{work}/nginx", "-c", f"{work}/nginx/nginx.conf",
                                  "-e", f"{work}/nginx/logs/error.log"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not accepts(nginx_port):
            if time.monotonic() > deadline:
                fail("nginx did not start")
            time.sleep(0.05)
        url = f"http://127.0.0.1:{nginx_port}"
        print(f"{LAB}: servers on ports {ports[0]} and {ports[1]}, nginx at {url}; "
              f"{hiccups} outages of {outage:g} s, {writes} writes queued in each", flush=True)

        client_log = open(f"{work}/client.log", "a")
        client = Client(args.bin, f"{work}/app.sqlite", url, client_log)
        # A first batch while everything is up: the client has signed in and is online.
        mark = client.mark()
        client.queue(10)
        total = 10
        if client.wait_for("empty", after=mark, timeout=60) is None:
            fail("the first writes were not delivered within 60 s with both servers up")

        figures = []
        for hiccup in range(1, hiccups + 1):
            # The client's monitor changes its verdict at most once per 5 s (it does not flap):
            # an outage that began right after the last recovery would measure that hold instead.
            time.sleep(5)
            hiccup_mark = client.mark()
            kill_server(0)
            kill_server(1)
            down_at = time.monotonic()
            # Some writes at once (sent, refused with 502, backing off while the outage lasts),
            # the rest midway.
            client.queue(writes - writes // 3)
            time.sleep(outage / 2)
            client.queue(writes // 3)
            total += writes
            time.sleep(max(0, down_at + outage - time.monotonic()))
            mark = client.mark()
            start_server(0)
            start_server(1)
            both_up = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if answers_health(ports[0]) and answers_health(ports[1]):
                    both_up = time.time()
                    break
                time.sleep(0.02)
            if both_up is None:
                fail(f"hiccup {hiccup}: the servers did not answer /health within 60 s")
            emptied = client.wait_for("empty", after=mark, timeout=120)
            if emptied is None:
                fail(f"hiccup {hiccup}: the queue was not empty 120 s after both servers answered")
            seconds = emptied - both_up
            figures.append(seconds)
            acks = [at for at in acknowledged_writes(f"{work}/nginx/logs/access.log") if at >= both_up - 30]
            first_ack = min((at for at in acks if at >= both_up), default=None)
            first = f"first write acknowledged after {first_ack - both_up:.2f} s, " if first_ack else ""
            if os.environ.get("OUTBOX_HICCUP_VERBOSE"):
                with client.changed:
                    seen = client.lines[hiccup_mark:]
                for _, at, text in seen:
                    print(f"    {at - both_up:+.2f} s {text}")
            print(f"{LAB}: hiccup {hiccup}: {first}queue empty {seconds:.2f} s after both servers answered /health",
                  flush=True)

        client.stop()
        verify = subprocess.run([args.bin, "outbox", "verify", "--server", f"http://127.0.0.1:{ports[0]}",
                                 "--count", str(total), "--collection", "hiccup"], capture_output=True, text=True)
        print(verify.stdout, end="", flush=True)
        report = dict(line.split(": ", 1) for line in verify.stdout.splitlines() if ": " in line)
        lost, duplicated = report.get("lost", "?"), report.get("duplicated", "?")
        longest = max(figures)
        print(f"outbox hiccup lab: {hiccups} hiccups, {total} writes, {lost} lost, {duplicated} duplicated; "
              f"queue empty after both servers answered: longest {longest:.2f} s, "
              f"median {statistics.median(figures):.2f} s (limit {limit:g} s)", flush=True)
        if verify.returncode != 0:
            print(verify.stderr, end="")
            fail("writes were lost or applied twice")
        if longest > limit:
            fail(f"a queue took {longest:.2f} s to empty after the servers answered again (limit {limit:g} s)")
    finally:
        if client is not None:
            client.stop()
        for server in servers:
            if server is not None and server.poll() is None:
                server.kill()
                server.wait()
        if nginx is not None:
            nginx.terminate()
            nginx.wait()


if __name__ == "__main__":
    main()
