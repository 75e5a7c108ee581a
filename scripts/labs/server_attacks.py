#!/usr/bin/env python3
"""The server half of the attack lab (75-server-attacks.sh): what one party can take from everyone else.

    server_attacks.py --bin OFFLINE --work FOLDER

Starts `offline serve` (demo accounts, a packs folder, a data folder) and, while the attacks
that load it run, measures what another user gets: `GET /health` every 20 ms, ben signing in
every 500 ms, a pack file read every 100 ms; and the server's resident memory every 250 ms
(from /proc). The cases, one after another (numbered as in "Hostile on both sides"):

1. slow readers: SLOW_READERS unauthenticated connections each pipeline twenty
   `GET /health/sample?bytes=1048576` and read nothing, for SLOW_SECONDS;
2. one account's streams: ana opens STREAMS live sync streams (`/api/sync/events`) and holds them;
6. sign-in flood: 16 clients at another loopback address sign in with wrong names in a loop,
   for FLOOD_SECONDS;
3. PATCH growth: 100 PATCHes each adding 60 KB to one 60 KB record;
4. records: ana writes records of RECORD_BYTES until refused (the lab's quota is QUOTA_BYTES),
   then lists them following `Link`, with the probes running;
5. refresh race: REFRESH_TRIALS times, two refreshes of one token at once;
7. side channels: ben's live stream while ana writes 5 times; a cursor ahead of the feed, Host
   missing or twice, `bearer` in lower case, a 401's content type.

Each loading attack prints the figures beside the same probes with no attack (measured first).
The lab fails when a limit below is passed: other users' /health p99, memory above idle under the
slow readers and the records, streams one account holds, the pack reads' p50 under the sign-in
flood (at most twice the quiet one plus 5 ms), a record grown past its limit, a list not read
whole or a page past 4 MiB, a refresh race lost, a write that shows on another user's stream, a
small leak back. Probes that got no answer, and sign-in's latency, are printed.

Settings (environment): SLOW_READERS (300), SLOW_SECONDS (12), WRITE_TIMEOUT (the server's
    --response-write-timeout, 10 s), STREAMS (200), FLOOD_SECONDS (6), RECORD_BYTES (60000),
    QUOTA_BYTES (8 MiB), REFRESH_TRIALS (40), LIMIT_HEALTH_P99_MS (50), LIMIT_MEMORY_MIB (128).
"""
import argparse
import base64
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

LAB = "server-attacks"
# The attackers' address: another loopback address than the probes', as another machine's would
# be (Linux answers all of 127.0.0.0/8 on lo).
ATTACKER = "127.0.0.2"


def env(name, default):
    return type(default)(os.environ.get(name, default))


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def request(url, method="GET", body=None, headers=None, timeout=5):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Probes:
    """Another user's requests, timed, on threads of their own, while an attack runs."""

    def __init__(self, url, pid, pack_path):
        self.url, self.pid, self.pack_path = url, pid, pack_path
        self.samples = {"health": [], "sign-in": [], "pack": []}
        self.failures = {"health": 0, "sign-in": 0, "pack": 0}
        self.errors = {}
        self.memory = []
        self.stop = threading.Event()

    def _loop(self, name, every, call):
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                status = call()
                ok = status in (200, 204)
                if not ok:
                    self.errors[f"{name} {status}"] = self.errors.get(f"{name} {status}", 0) + 1
            except OSError as error:
                ok = False
                kind = f"{name} {type(getattr(error, 'reason', error)).__name__}"
                self.errors[kind] = self.errors.get(kind, 0) + 1
            elapsed = (time.monotonic() - start) * 1000
            if ok:
                self.samples[name].append(elapsed)
            else:
                self.failures[name] += 1
            self.stop.wait(max(0, every - elapsed / 1000))

    def _memory(self):
        while not self.stop.is_set():
            self.memory.append(rss_mib(self.pid))
            self.stop.wait(0.25)

    def __enter__(self):
        calls = [
            ("health", 0.02, lambda: request(self.url + "/health", timeout=5)[0]),
            ("sign-in", 0.5, lambda: request(self.url + "/api/auth/sign-in", "POST",
                                             {"name": "ben", "password": "offline-demo"}, timeout=10)[0]),
            ("pack", 0.1, lambda: request(self.url + self.pack_path, timeout=5)[0]),
        ]
        self.threads = [threading.Thread(target=self._loop, args=call, daemon=True) for call in calls]
        self.threads.append(threading.Thread(target=self._memory, daemon=True))
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=15)

    def line(self, name):
        values = self.samples[name]
        # The longest too: each probe waits for its answer before asking again, so a stall of
        # a second costs one sample, which the p99 of hundreds leaves out.
        return (f"{name}: p50 {percentile(values, 0.5):.1f} ms, p99 {percentile(values, 0.99):.1f} ms, "
                f"max {max(values, default=float('nan')):.1f} ms, {len(values)} answered, {self.failures[name]} failed")


def sign_in(url, name):
    status, body = request(url + "/api/auth/sign-in", "POST", {"name": name, "password": "offline-demo"})
    assert status == 200, f"{name} could not sign in: {status} {body[:200]}"
    return json.loads(body)["accessToken"]


def host_port(url):
    """`http://HOST:PORT` as (HOST, PORT)."""
    host, port = url.split("//")[1].split(":")
    return host, int(port)


def open_stream(url, token):
    """A connection asking for TOKEN's live sync stream (`/api/sync/events`), its answer unread."""
    s = socket.create_connection(host_port(url))
    s.sendall(f"GET /api/sync/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return s


def api(url, method, path, token=None, body=None, key=None, headers=None, timeout=10):
    """A request to the API as ana or ben would send it: a token, an Idempotency-Key on writes."""
    fields = dict(headers or {})
    if token:
        fields["Authorization"] = f"Bearer {token}"
    if key:
        fields["Idempotency-Key"] = f'"{key}"'
    return request(url + path, method, body, fields, timeout)


def raw(host, port, head, timeout=5):
    """Sends HEAD (bytes, as they are) on a new connection; returns the answer's status line."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(head)
        return s.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")


def database_mib(folder):
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)) / (1 << 20)


def patch_growth(url, token, data):
    """Case 3: a 60 KB record, then 100 PATCHes that each add 60 KB. Returns (statuses, the
    record's size after, PATCH p99 in ms, database growth in MiB)."""
    before = database_mib(data)
    chunk = "x" * 60_000
    status, _ = api(url, "PUT", "/api/records/notes/grow", token, {"f0": chunk}, key=f"grow-{time.time()}")
    assert status == 200, f"PUT answered {status}"
    statuses, times = {}, []
    for index in range(1, 101):
        start = time.monotonic()
        status, _ = api(url, "PATCH", "/api/records/notes/grow", token, {f"f{index}": chunk}, key=f"grow-{index}-{time.time()}")
        times.append((time.monotonic() - start) * 1000)
        statuses[status] = statuses.get(status, 0) + 1
    _, body = api(url, "GET", "/api/records/notes/grow", token)
    return statuses, len(body), percentile(times, 0.99), database_mib(data) - before


def fill_and_list(url, token, record_bytes):
    """Case 4: ana writes records of RECORD_BYTES until the server refuses one, then lists the
    collection a page at a time. Returns (records stored, the refusal's status, pages, largest
    page in bytes, records listed)."""
    chunk = "y" * (record_bytes - 32)
    stored, refusal = 0, None
    while refusal is None and stored < 10_000:
        status, _ = api(url, "PUT", f"/api/records/bulk/r{stored:05d}", token, {"t": chunk}, key=f"bulk-{stored}-{time.time()}")
        if status == 200:
            stored += 1
        else:
            refusal = status
    pages, largest, listed, path = 0, 0, 0, "/api/records/bulk"
    while path and pages < 1_000:
        req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as response:
            body = response.read()
            link = response.headers.get("Link")
        pages += 1
        largest = max(largest, len(body))
        listed += len(json.loads(body))
        path = link.split(">")[0][1:] if link else None
    return stored, refusal, pages, largest, listed


def refresh_race(url, trials):
    """Case 5: TRIALS times, two refreshes of one token at once. Returns how many trials ended
    with one refresh refused while the other's new pair still works (the lost race)."""
    lost = 0
    for _ in range(trials):
        status, body = request(url + "/api/auth/sign-in", "POST", {"name": "ana", "password": "offline-demo"})
        assert status == 200, f"ana could not sign in: {status}"
        token = json.loads(body)["refreshToken"]
        answers = [None, None]
        gate = threading.Barrier(2)

        def refresh(slot):
            gate.wait()
            answers[slot] = request(url + "/api/auth/refresh", "POST", {"refreshToken": token})

        threads = [threading.Thread(target=refresh, args=(slot,)) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(answer[0] for answer in answers)
        if statuses == [200, 401]:
            pair = json.loads(next(body for status, body in answers if status == 200))
            if api(url, "GET", "/api/records/notes?limit=1", pair["accessToken"])[0] == 200:
                lost += 1
    return lost


def stream_echoes(url, reader, writer, writes):
    """Case 7: READER holds a live stream while WRITER (another user) writes WRITES times; returns
    how many of the writes the reader's stream answered within 250 ms (a heartbeat or an event
    it has no reason to send)."""
    s = open_stream(url, reader)
    s.settimeout(0.5)
    try:
        while s.recv(4096):
            pass
    except socket.timeout:
        pass
    echoed = 0
    for index in range(writes):
        status, _ = api(url, "PUT", f"/api/records/notes/echo-{index}", writer, {"n": index}, key=f"echo-{index}-{time.time()}")
        assert status == 200, f"the write answered {status}"
        s.settimeout(0.25)
        try:
            if s.recv(4096):
                echoed += 1
        except socket.timeout:
            pass
        time.sleep(0.2)
    s.close()
    return echoed


def small_leaks(url, token):
    """Case 7's other checks: a cursor ahead of the feed, Host missing or twice, `bearer` in lower
    case, the shape of a 401. Returns a list of (check, what came, whether it is right)."""
    host, port = host_port(url)
    _, body = api(url, "GET", "/api/sync?collections=records/notes", token)
    cursor = json.loads(body)["cursor"]
    fields = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    fields["p"] = fields.get("p", 0) + 1000
    ahead = base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode().rstrip("=")
    status, _ = api(url, "GET", f"/api/sync?collections=records/notes&cursor={ahead}", token)
    checks = [("a cursor 1,000 ahead of the feed", status, status in (400, 410))]
    line = raw(host, port, b"GET /health HTTP/1.1\r\n\r\n")
    checks.append(("HTTP/1.1 without Host", line, " 400 " in line + " "))
    line = raw(host, port, b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    checks.append(("two Host fields", line, " 400 " in line + " "))
    status, _ = request(url + "/api/records/notes?limit=1", headers={"Authorization": f"bearer {token}"})
    checks.append(("`bearer` in lower case", status, status == 200))
    req = urllib.request.Request(url + "/api/records/notes")
    try:
        urllib.request.urlopen(req, timeout=5)
        kind = "200"
    except urllib.error.HTTPError as error:
        kind = f"{error.code} {error.headers.get('Content-Type')}"
    checks.append(("a 401's type", kind, kind == "401 application/problem+json"))
    return checks


def slow_readers(host, port, count, seconds):
    """COUNT connections each pipelining twenty 1 MiB samples and reading nothing; returns how
    many the server had closed by the end."""
    head = b"GET /health/sample?bytes=1048576 HTTP/1.1\r\nHost: x\r\n\r\n" * 20
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, port))
        s.sendall(head)
        sockets.append(s)
    time.sleep(seconds)
    closed = 0
    for s in sockets:
        try:
            s.setblocking(False)
            # A closed connection reads as EOF or a reset once its buffered bytes are taken.
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    return closed


def streams(url, token, count):
    """Ana opens COUNT live streams; returns (accepted, refused with 429), holding them open for
    a few seconds while the probes run."""
    accepted = refused = 0
    held = []
    for _ in range(count):
        s = open_stream(url, token)
        s.settimeout(5)
        head = s.recv(256)
        if head.startswith(b"HTTP/1.1 200"):
            accepted += 1
            held.append(s)
        else:
            refused += 1 if head.startswith(b"HTTP/1.1 429") else 0
            s.close()
    time.sleep(3)
    for s in held:
        s.close()
    return accepted, refused


def flood(url, seconds):
    """16 clients at ATTACKER (another loopback address than the probes') sign in with wrong
    names in a loop; returns how many answers came and of which status."""
    stop = time.monotonic() + seconds
    counts = {}
    host, port = host_port(url)

    def loop(worker):
        attempt = 0
        while time.monotonic() < stop:
            # A new name each time: the per-name throttle would answer a repeated one at once.
            attempt += 1
            body = json.dumps({"name": f"nobody-{worker}-{attempt}", "password": "wrong"})
            try:
                connection = http.client.HTTPConnection(host, port, timeout=10, source_address=(ATTACKER, 0))
                connection.request("POST", "/api/auth/sign-in", body, {"Content-Type": "application/json"})
                status = connection.getresponse().status
                connection.close()
                counts[status] = counts.get(status, 0) + 1
            except OSError:
                counts["no answer"] = counts.get("no answer", 0) + 1

    threads = [threading.Thread(target=loop, args=(worker,), daemon=True) for worker in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    limit_p99 = env("LIMIT_HEALTH_P99_MS", 50.0)
    limit_memory = env("LIMIT_MEMORY_MIB", 128.0)
    log = open(os.path.join(args.work, "server.log"), "w")
    # A write timeout of 10 s (30 by default), so the slow readers meet it within the lab's time.
    data = os.path.join(args.work, "data")
    os.makedirs(data)
    # A record quota of 8 MiB (64 by default), so case 4 meets it within the lab's time.
    server = subprocess.Popen([args.bin, "serve", "--port", "0", "--demo-accounts", "--packs", os.path.join(args.work, "packs"),
                               "--data", data, "--max-record-bytes-per-user", str(env("QUOTA_BYTES", 8 << 20)),
                               "--response-write-timeout", str(env("WRITE_TIMEOUT", 10))],
                              stdout=log, stderr=subprocess.STDOUT)
    failures = []
    try:
        url = None
        for _ in range(200):
            with open(os.path.join(args.work, "server.log")) as f:
                for line in f:
                    if "listening on http://" in line:
                        url = line.strip().split("listening on ")[1]
            if url:
                break
            time.sleep(0.05)
        assert url, "the server did not start"
        host, port = host_port(url)
        status, body = request(url + "/packs")
        packs = json.loads(body)
        pack = packs[0]
        manifest_status, _ = request(f"{url}/packs/{pack['id']}/latest.json")
        pack_path = f"/packs/{pack['id']}/latest.json" if manifest_status == 200 else "/packs"

        time.sleep(1)
        idle = rss_mib(server.pid)
        with Probes(url, server.pid, pack_path) as quiet:
            time.sleep(4)
        print(f"{LAB}: no attack (4 s), memory {idle:.0f} MiB at idle")
        for name in ("health", "sign-in", "pack"):
            print(f"  {quiet.line(name)}")

        def judge(label, probes):
            p99 = percentile(probes.samples["health"], 0.99)
            if not p99 <= limit_p99:
                failures.append(f"{label}: /health p99 {p99:.1f} ms > {limit_p99:.0f} ms")
            # Reported, not judged yet: a few probes time out while 300 slow readers connect and
            # are closed, and a sign-in waits behind every bcrypt check queued before it.
            if probes.errors:
                print(f"  not answered: {probes.errors}")

        readers, seconds = env("SLOW_READERS", 300), env("SLOW_SECONDS", 12.0)
        with Probes(url, server.pid, pack_path) as probes:
            closed = slow_readers(host, port, readers, seconds)
        peak = max(probes.memory) - idle
        print(f"{LAB}: {readers} slow readers, {seconds:.0f} s: memory peak {peak:.0f} MiB above idle "
              f"(limit {limit_memory:.0f}); {closed} of {readers} closed by the server")
        for name in ("health", "sign-in", "pack"):
            print(f"  {probes.line(name)}")
        judge("slow readers", probes)
        if not peak <= limit_memory:
            failures.append(f"slow readers: memory {peak:.0f} MiB above idle > {limit_memory:.0f} MiB")

        token = sign_in(url, "ana")
        count = env("STREAMS", 200)
        with Probes(url, server.pid, pack_path) as probes:
            accepted, refused = streams(url, token, count)
        print(f"{LAB}: ana opens {count} live streams: {accepted} accepted, {refused} refused with 429")
        for name in ("health", "sign-in"):
            print(f"  {probes.line(name)}")
        judge("one account's streams", probes)
        if accepted > 8:
            failures.append(f"one account's streams: {accepted} accepted, more than 8")

        with Probes(url, server.pid, pack_path) as probes:
            counts = flood(url, env("FLOOD_SECONDS", 6.0))
        print(f"{LAB}: 16 clients at {ATTACKER} signing in with wrong names: answers by status {counts} "
              f"(401 wrong, 429 throttled, 503 too many waiting)")
        for name in ("health", "sign-in", "pack"):
            print(f"  {probes.line(name)}")
        judge("sign-in flood", probes)
        quiet_pack, flood_pack = percentile(quiet.samples["pack"], 0.5), percentile(probes.samples["pack"], 0.5)
        if not flood_pack <= 2 * quiet_pack + 5:
            failures.append(f"sign-in flood: pack p50 {flood_pack:.1f} ms against {quiet_pack:.1f} ms with no attack")

        # Case 3: a PATCH may not grow a record past its collection's limit.
        statuses, size, p99, growth = patch_growth(url, token, data)
        print(f"{LAB}: 100 PATCHes adding 60 KB each to one record: answers {statuses}; the record is {size:,} bytes; "
              f"PATCH p99 {p99:.1f} ms; the database grew {growth:.1f} MiB")
        if size > 64 << 10 or statuses.get(200, 0) > 1:
            failures.append(f"PATCH growth: the record reached {size:,} bytes ({statuses})")

        # Case 4: records until the quota, then the list a page at a time, another user watching.
        record_bytes = env("RECORD_BYTES", 60_000)
        with Probes(url, server.pid, pack_path) as probes:
            stored, refusal, pages, largest, listed = fill_and_list(url, token, record_bytes)
        peak = max(probes.memory) - idle
        print(f"{LAB}: records of {record_bytes:,} bytes until refused: {stored} stored, then {refusal}; listed {listed} "
              f"in {pages} pages, the largest {largest / (1 << 20):.2f} MiB; memory peak {peak:.0f} MiB above idle")
        for name in ("health", "sign-in"):
            print(f"  {probes.line(name)}")
        judge("records and lists", probes)
        if refusal != 403 or listed != stored or largest > (4 << 20) + 2 * record_bytes or not peak <= limit_memory:
            failures.append(f"records and lists: refused with {refusal}, {listed} of {stored} listed, "
                            f"largest page {largest:,} bytes, memory {peak:.0f} MiB")

        # Case 5: two refreshes of one token at once never leave a refusal beside a working pair.
        trials = env("REFRESH_TRIALS", 40)
        lost = refresh_race(url, trials)
        print(f"{LAB}: two refreshes of one token at once, {trials} times: {lost} left a refusal beside a working pair")
        if lost:
            failures.append(f"refresh race: lost {lost} of {trials}")

        # Case 7: side channels and small leaks.
        ben = sign_in(url, "ben")
        echoed = stream_echoes(url, ben, token, 5)
        print(f"{LAB}: ben's live stream answered {echoed} of ana's 5 writes within 250 ms")
        if echoed:
            failures.append(f"stream side channel: {echoed} of 5 of ana's writes showed on ben's stream")
        for check, came, right in small_leaks(url, token):
            print(f"  {check}: {came}{'' if right else '  (wrong)'}")
            if not right:
                failures.append(f"{check}: {came}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    if failures:
        print(f"{LAB}: FAILED")
        for failure in failures:
            print(f"  {failure}")
        sys.exit(1)
    print(f"{LAB}: passed")


if __name__ == "__main__":
    main()
