#!/usr/bin/env python3
"""The run and the checks of the PostgreSQL fault lab (56-pg-faults.sh), which starts the primary
cluster, makes the app's tables and the rules file, then runs this with:

    pg_faults.py run

and its settings in the environment (LAB_* from the lab; PG_FAULTS_* from the user, see the lab).

This starts the rest: a TCP proxy in front of the primary (the servers' only way to the
database, moved to the standby by a failover), the truth recorder (a `test_decoding` slot read by
`pg_recvlogical`, straight from the primary, started again after every restart), two
`offline serve` instances, psql writers, and two devices per user pulling `lab_issues` in turn
from the instances. Then one phase per fault: the writers write, the fault, they write on, they
pause; every device must equal the rows its user may see now (read by psql) before a deadline.

The history check: the recorder's log is parsed into the commits of each primary (a segment,
from the tables' state when its truth slot was made: the first before the servers start, the
next when a failover promoted the standby), each with its changes to issues and project_members
(a transaction the slot sends again after an immediate restart is kept once, by its xid). The
rows a user may see after commit i, visible(u, i), are followed through the log as a sum of the
rows' hashes (a project's rows summed apart, so that a membership adds or takes a whole project).
Every state a device held after a pull that ended with 0 must equal visible(u, i) for some i,
never lower than its last state's i: a hash found by a forward search from the last match,
confirmed row by row. A pull that began before a failover's proxy switch is checked against the
old primary's log; one after it, against the old log up to the last commit the standby had
replayed followed by the new primary's (a device that had shown commits the standby lost goes on
from the promotion). Before each check, a self-test plants a torn transaction and a step back
built from the real log, and the checker must reject both and accept the real states around them.
"""
import bisect
import datetime
import hashlib
import json
import os
import random
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

LAB = "pg-faults"
COLLECTION = "lab_issues"
PROJECTS = ["p1", "p2", "p3", "p4"]
USERS = ["ana", "ben"]
# name, user, which instance the device's first pull goes to (then each pull the other)
DEVICES = [("ana-1", "ana", 0), ("ana-2", "ana", 1), ("ben-1", "ben", 0), ("ben-2", "ben", 1)]
KINDS = ["fast", "immediate", "terminate", "slot-drop", "failover"]
KIND_NAMES = {"fast": "pg_ctl restart -m fast", "immediate": "pg_ctl restart -m immediate",
              "terminate": "capture's sessions terminated", "slot-drop": "capture's slot dropped",
              "failover": "failover to a standby", "none": "no fault"}
COUNT_SETTINGS = {"fast": ("PG_FAULTS_FAST", "10"), "immediate": ("PG_FAULTS_IMMEDIATE", "10"),
                  "terminate": ("PG_FAULTS_TERMINATE", "2"), "slot-drop": ("PG_FAULTS_SLOT_DROP", "1"),
                  "failover": ("PG_FAULTS_FAILOVER", "1")}
# Memberships that come and go: ben leaves p1 and joins again, joins p2 and leaves it, ana joins
# p4 and leaves it, leaves p2 and joins again.
TOGGLES = [("ben", "p1"), ("ben", "p2"), ("ana", "p4"), ("ana", "p2")]
# Bodies that make the JSON encoders work: quotes, backslashes, newlines, non-ASCII, emoji, null.
BODIES = ["hello", 'she said "hi"', "back\\slash", "line one\nline two", "ünïcödé ✓", "emoji 🎉", "it's", None]
# PostgresCapture.lockKey: capture's advisory lock (its low 32 bits are pg_locks.objid).
CAPTURE_LOCK = 0x0FF1_CA97
MODULUS = 1 << 128
TRUTH_SLOT = "lab_truth"


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"{LAB}: {name} is not set (run scripts/labs/56-pg-faults.sh)")
    return value


def sql_text(text):
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


class LabError(Exception):
    """A step of the lab itself failed (a cluster that would not start, a psql that failed)."""


# Rows and states

def issue_json(columns):
    """An issues row as the rules send it (columns named as the table names them)."""
    return {"id": columns["id"], "project": columns["project_id"], "title": columns["title"], "body": columns["body"],
            "version": columns["version"], "done": columns["done"], "batch": columns["batch"],
            "batchSize": columns["batch_size"]}


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def row_hash(id, text):
    return int.from_bytes(hashlib.blake2b(f"{id}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest(), "big")


def state_hash(state):
    """A state (id -> canonical JSON) as the sum of its rows' hashes: a multiset hash, so that
    visible(u, i) can be kept up to date one row at a time."""
    return sum(row_hash(id, text) for id, text in state.items()) % MODULUS


def differences(expected, held):
    missing = sorted(set(expected) - set(held))
    extra = sorted(set(held) - set(expected))
    different = sorted(id for id in expected.keys() & held.keys() if expected[id] != held[id])
    return missing, extra, different


def describe_differences(expected, held, limit=3):
    missing, extra, different = differences(expected, held)
    lines = ([f"missing {id}: {expected[id]}" for id in missing[:limit]]
             + [f"extra {id}: {held[id]}" for id in extra[:limit]]
             + [f"different {id}: truth {expected[id]}, device {held[id]}" for id in different[:limit]])
    return f"missing {len(missing)}, extra {len(extra)}, different {len(different)}", lines


# The truth recorder's log: test_decoding's output, as pg_recvlogical writes it

NAME = r'(?:"(?:[^"]|"")*"|[^\[\n "]+)'
TYPE = r"(?:[^\]\[\n]|\[\])*"
VALUE = r"(?:'[^']*(?:''[^']*)*'|B'[01]*'|[^ \n']+)"
FLAG = r"old-key:|new-tuple:|\((?:no-tuple-data|no-flags)\)|restart_seqs|cascade"
BEGIN_LINE = re.compile(r"BEGIN (\d+)\n")
COMMIT_LINE = re.compile(r"COMMIT (\d+)(?: \(at ([^)\n]*)\))?\n")
# One change: values in quotes may hold newlines, so a message is matched whole, not by lines.
TABLE_MESSAGE = re.compile(rf"table ([^\n]*?): (INSERT|UPDATE|DELETE|TRUNCATE):((?: (?:{FLAG}|{NAME}\[{TYPE}\]:{VALUE}))*)\n")
COLUMN = re.compile(rf" (?:({FLAG})|({NAME})\[({TYPE})\]:({VALUE}))")
TOAST = object()
TABLES = {"public.issues": "issues", "public.project_members": "project_members", "public.lab_marker": "lab_marker"}


def literal(type_, raw):
    if raw == "null":
        return None
    if raw == "unchanged-toast-datum":
        return TOAST
    text = raw[1:-1].replace("''", "'") if raw.startswith("'") else raw
    if type_ in ("integer", "bigint", "smallint"):
        return int(text)
    if type_ == "boolean":
        return text == "true"
    return text


def commit_time(text):
    if text is None:
        return None
    text = text.strip()
    if re.search(r"[+-]\d\d$", text):
        text += ":00"
    return datetime.datetime.fromisoformat(text).timestamp()


def parse_transactions(text, position):
    """The complete transactions of `text` from `position`: a list of (xid, commit time, changes)
    (changes to the lab's tables only: (table, operation, columns, old key or None)), where it
    stopped, and why when that is not the end (an incomplete message, or one it cannot read)."""
    transactions = []
    while position < len(text):
        begin = BEGIN_LINE.match(text, position)
        if not begin:
            return transactions, position, f"no BEGIN at {text[position:position + 80]!r}"
        xid = int(begin.group(1))
        at = begin.end()
        changes = []
        while True:
            if text.startswith("COMMIT", at):
                commit = COMMIT_LINE.match(text, at)
                if not commit:
                    return transactions, position, f"an incomplete COMMIT at {text[at:at + 80]!r}"
                if int(commit.group(1)) != xid:
                    raise LabError(f"the truth log's transaction {xid} ends with COMMIT {commit.group(1)}")
                transactions.append((xid, commit_time(commit.group(2)), changes))
                position = commit.end()
                break
            message = TABLE_MESSAGE.match(text, at)
            if not message:
                return transactions, position, f"an incomplete or unreadable change at {text[at:at + 120]!r}"
            at = message.end()
            table = TABLES.get(message.group(1))
            if table is None:
                continue
            operation = message.group(2)
            if operation == "TRUNCATE":
                raise LabError(f"the truth log has a TRUNCATE of {table}, which the lab never runs")
            columns, old, target = {}, None, None
            for column in COLUMN.finditer(message.group(3)):
                flag, name, type_, raw = column.groups()
                if flag == "old-key:":
                    old = target = {}
                elif flag == "new-tuple:":
                    target = columns
                elif flag is None:
                    (target if target is not None else columns)[name] = literal(type_, raw)
            changes.append((table, operation, columns, old))
    return transactions, position, None


class Commit:
    __slots__ = ("xid", "at", "changes", "segment", "number")

    def __init__(self, xid, at, changes, segment, number):
        self.xid, self.at, self.changes, self.segment, self.number = xid, at, changes, segment, number


def label(timeline, i):
    if i == 0:
        return f"the start of segment {timeline.root}'s log"
    commit = timeline.commits[i - 1]
    return f"commit #{commit.number} of segment {commit.segment} (xid {commit.xid})"


class Truth:
    """The commit log of one primary (a segment): the tables' state when its truth slot was made,
    then each committed transaction that changed issues or project_members, in commit order
    (xids seen twice, as after an immediate restart, kept once). State 0 is the initial state;
    state i is the state after commits[i - 1]."""

    def __init__(self, number, port, issues, members):
        self.number, self.port = number, port
        self.root, self.key = number, f"segment {number}"
        self.issues, self.members = issues, members
        self.commits = []
        self.xids = {}
        self.markers = {}          # marker id -> state index
        self.files = []            # one per recorder start, in order
        self.offsets = {}          # file -> bytes parsed
        self.stopped = {}          # file -> why its parse stopped before its end
        self.resent = 0
        self.lock = threading.Lock()

    def add_file(self, path):
        with self.lock:
            self.files.append(path)

    def parse(self):
        """Reads what the recorder wrote since the last parse. Only transactions whose COMMIT is in
        the file count; an older file's unfinished tail was sent again into the next one."""
        with self.lock:
            files = list(self.files)
        for number, path in enumerate(files):
            if not os.path.exists(path):
                continue
            offset = self.offsets.get(path, 0)
            with open(path, "rb") as file:
                file.seek(offset)
                data = file.read()
            if not data:
                continue
            text = data.decode("utf-8", "surrogateescape")
            transactions, stop, why = parse_transactions(text, 0)
            self.offsets[path] = offset + len(text[:stop].encode("utf-8", "surrogateescape"))
            if why:
                self.stopped[path] = why
                # A recorder that ended leaves at most one transaction unfinished, without its COMMIT.
                if number < len(files) - 1 and re.search(r"^COMMIT \d+", text[stop:], re.M):
                    raise LabError(f"the truth log {os.path.basename(path)} cannot be read past byte {self.offsets[path]}: {why}")
            else:
                self.stopped.pop(path, None)
            for xid, at, changes in transactions:
                markers = [columns["id"] for table, _, columns, _ in changes if table == "lab_marker"]
                data_changes = [change for change in changes if change[0] != "lab_marker"]
                if xid in self.xids:
                    # Sent again after a restart: the same transaction, or the log is wrong.
                    self.resent += 1
                    index = self.xids[xid]
                    if data_changes and (index is None or self.commits[index].changes != data_changes):
                        raise LabError(f"the truth log sent transaction {xid} again with other changes")
                    continue
                self.xids[xid] = len(self.commits) if data_changes else None
                if data_changes:
                    self.commits.append(Commit(xid, at, data_changes, self.number, len(self.commits) + 1))
                for marker in markers:
                    self.markers[marker] = len(self.commits)

    def status(self):
        return "; ".join(f"{os.path.basename(path)}: {os.path.getsize(path) if os.path.exists(path) else 0} bytes, "
                         f"parsed to {self.offsets.get(path, 0)}" + (f", stopped at {self.stopped[path]}" if path in self.stopped else "")
                         for path in self.files[-3:])


class Timeline:
    """The history a promoted standby's devices may show: the old primary's timeline up to the
    commit the standby had replayed, then the new primary's own commits. Checked like a Truth."""

    def __init__(self, number, previous, kept, truth):
        self.number, self.root, self.key = number, previous.root, f"timeline {number}"
        self.issues, self.members = previous.issues, previous.members
        self.commits = previous.commits[:kept] + truth.commits


class Replay:
    """The lab's tables at one point of a Truth, with each project's rows and their hash sum."""

    def __init__(self, truth):
        self.truth = truth
        self.index = 0
        self.rows = {}             # id -> (columns, canonical JSON, hash)
        self.by_project = {}       # project -> {id: hash}
        self.sums = {}             # project -> sum of its rows' hashes
        self.members = set()
        for columns in truth.issues.values():
            self.put(dict(columns))
        for project, member in truth.members:
            self.members.add((project, member))

    def put(self, columns):
        id = columns["id"]
        self.drop(id)
        text = canonical(issue_json(columns))
        h = row_hash(id, text)
        self.rows[id] = (columns, text, h)
        project = columns["project_id"]
        self.by_project.setdefault(project, {})[id] = h
        self.sums[project] = (self.sums.get(project, 0) + h) % MODULUS

    def drop(self, id):
        old = self.rows.pop(id, None)
        if old:
            project = old[0]["project_id"]
            del self.by_project[project][id]
            self.sums[project] = (self.sums[project] - old[2]) % MODULUS
        return old

    def step(self):
        """Applies the next commit."""
        commit = self.truth.commits[self.index]
        for table, operation, columns, old in commit.changes:
            if table == "issues":
                if operation == "DELETE":
                    self.drop(columns["id"])
                    continue
                previous = self.drop(old["id"]) if old else self.rows.get(columns["id"])
                if any(value is TOAST for value in columns.values()):
                    columns = {name: (previous[0][name] if value is TOAST else value) for name, value in columns.items()}
                self.put(dict(columns))
            else:
                if operation in ("DELETE", "UPDATE"):
                    key = old if old is not None else columns
                    if operation == "DELETE" or old is not None:
                        self.members.discard((key["project_id"], key["member"]))
                if operation in ("INSERT", "UPDATE"):
                    self.members.add((columns["project_id"], columns["member"]))
        self.index += 1

    def to(self, index):
        while self.index < index:
            self.step()

    def projects(self, user):
        return {project for project, member in self.members if member == user}

    def hash(self, user):
        return sum(self.sums.get(project, 0) for project in self.projects(user)) % MODULUS

    def visible(self, user):
        return {id: self.rows[id][1] for project in self.projects(user) for id in self.by_project.get(project, ())}


class Entry:
    """A device's state after a pull that ended with 0."""
    __slots__ = ("started", "ended", "server", "segment", "state", "hash")

    def __init__(self, started, ended, server, segment, state):
        self.started, self.ended, self.server, self.segment = started, ended, server, segment
        self.state = state
        self.hash = state_hash(state)


class Checker:
    """Checks device histories against one Truth."""

    def __init__(self, truth):
        self.truth = truth
        replay = Replay(truth)
        self.hashes = {user: [replay.hash(user)] for user in USERS}
        while replay.index < len(truth.commits):
            replay.step()
            for user in USERS:
                self.hashes[user].append(replay.hash(user))
        self.final = replay
        self.index = {user: {} for user in USERS}
        for user in USERS:
            for i, h in enumerate(self.hashes[user]):
                self.index[user].setdefault(h, []).append(i)

    def describe(self, i):
        return label(self.truth, i)

    def check(self, histories, pointers):
        """histories: [(device, user, [Entry])]; pointers: device -> the index its last state
        matched (moved on here). Returns the failures: (device, user, entry, what, index)."""
        failures = []
        confirm = {}
        for device, user, entries in histories:
            pointer = pointers.get(device, 0)
            for entry in entries:
                candidates = self.index[user].get(entry.hash)
                if not candidates:
                    failures.append((device, user, entry, "matches no state the user could see after a commit", pointer))
                    continue
                k = bisect.bisect_left(candidates, pointer)
                if k == len(candidates):
                    failures.append((device, user, entry, f"steps back: it is {user}'s view at {self.describe(candidates[-1])}, "
                                     f"but the device had shown the view at {self.describe(pointer)}", pointer))
                    continue
                i = candidates[k]
                if i > 0 and self.truth.commits[i - 1].at is not None and self.truth.commits[i - 1].at > entry.ended:
                    failures.append((device, user, entry, f"is {user}'s view at {self.describe(i)}, committed "
                                     f"{self.truth.commits[i - 1].at - entry.ended:.3f} s after the pull ended", pointer))
                    continue
                confirm.setdefault(i, []).append((device, user, entry))
                pointer = i
            pointers[device] = pointer
        # Confirmed row by row: a hash is only a hash.
        replay = Replay(self.truth)
        for i in sorted(confirm):
            replay.to(i)
            views = {}
            for device, user, entry in confirm[i]:
                if user not in views:
                    views[user] = replay.visible(user)
                if views[user] != entry.state:
                    failures.append((device, user, entry, f"has the hash of {user}'s view at {self.describe(i)} but not its rows", i))
        return failures

    def closest(self, user, state, low, high, limit=3000):
        """The index in low..high whose view of `user` differs least from `state`."""
        high = min(high, len(self.truth.commits))
        low = max(0, min(low, high), high - limit)
        replay = Replay(self.truth)
        replay.to(low)
        best = None
        for i in range(low, high + 1):
            replay.to(i)
            view = replay.visible(user)
            missing, extra, different = differences(view, state)
            size = len(missing) + len(extra) + len(different)
            if best is None or size < best[0]:
                best = (size, i, view)
        return best


# Processes

class Psql:
    """One long-lived psql session fed statements on stdin; `run` waits until they are done."""

    def __init__(self, command, error_log, spawn):
        self.process = spawn(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=error_log, text=True, bufsize=1)
        self.used = False

    def run(self, sql):
        try:
            self.process.stdin.write(sql + "\n\\echo __done__\n")
            self.process.stdin.flush()
        except OSError as error:
            raise RuntimeError(f"psql ended ({error})")
        lines = []
        while True:
            line = self.process.stdout.readline()
            if line == "":
                raise RuntimeError("psql ended")
            line = line.rstrip("\n")
            if line == "__done__":
                self.used = True
                return lines
            lines.append(line)

    def close(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except Exception:
            self.process.kill()
            self.process.wait()


class Proxy:
    """A TCP proxy on a fixed port of 127.0.0.1 to the current primary, as a virtual IP: `switch`
    moves it, and every forwarded connection is closed then, or when either end closes it."""

    def __init__(self, target):
        self.target = target
        self.generation = 0
        self.lock = threading.Lock()
        self.pairs = set()
        self.stopped = False
        self.listener = None
        for _ in range(20):
            port = random.randint(30000, 59999)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("127.0.0.1", port))
            except OSError:
                listener.close()
                continue
            listener.listen(256)
            self.listener, self.port = listener, port
            break
        if self.listener is None:
            raise LabError("no free port for the proxy")
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.connect, args=(client,), daemon=True).start()

    def connect(self, client):
        with self.lock:
            target, generation = self.target, self.generation
        try:
            upstream = socket.create_connection(("127.0.0.1", target), timeout=2)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        for end in (client, upstream):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = (client, upstream)
        with self.lock:
            if self.stopped or generation != self.generation:
                client.close()
                upstream.close()
                return
            self.pairs.add(pair)
        threading.Thread(target=self.pump, args=(pair, client, upstream), daemon=True).start()
        threading.Thread(target=self.pump, args=(pair, upstream, client), daemon=True).start()

    def pump(self, pair, source, destination):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                destination.sendall(data)
        except OSError:
            pass
        self.close(pair)

    def close(self, pair):
        with self.lock:
            if pair not in self.pairs:
                return
            self.pairs.discard(pair)
        for end in pair:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def drop_all(self):
        with self.lock:
            pairs = list(self.pairs)
        for pair in pairs:
            self.close(pair)
        return len(pairs)

    def switch(self, target):
        with self.lock:
            self.target = target
            self.generation += 1
        return self.drop_all()

    def stop(self):
        with self.lock:
            self.stopped = True
        self.listener.close()
        self.drop_all()


class Cluster:
    def __init__(self, lab, folder, port):
        self.lab, self.folder, self.port = lab, folder, port
        self.data = os.path.join(folder, "data")
        self.log = os.path.join(folder, "log")

    def ctl(self, *arguments, timeout=150):
        return self.lab.as_postgres([os.path.join(self.lab.pg_bin, "pg_ctl"), "-D", self.data, "-l", self.log, "-w", "-t", "120",
                                     *arguments], timeout)


class Recorder:
    """pg_recvlogical on the truth slot of the current segment, started again whenever it ended
    (PostgreSQL restarts end it); each start writes a file of its own."""

    def __init__(self, lab):
        self.lab = lab
        self.lock = threading.Lock()
        self.truth = None
        self.paused = True
        self.process = None
        self.starts = 0
        threading.Thread(target=self.loop, daemon=True).start()

    def target(self, truth):
        with self.lock:
            self.truth, self.paused = truth, False

    def pause(self):
        with self.lock:
            self.paused = True

    def running(self):
        return self.process is not None and self.process.poll() is None

    def wait_ended(self, timeout):
        deadline = time.time() + timeout
        while self.running() and time.time() < deadline:
            time.sleep(0.05)
        if self.running():
            self.process.kill()
            self.process.wait()

    def loop(self):
        lab = self.lab
        log = open(os.path.join(lab.work, "recorder.log"), "a", buffering=1)
        while not lab.stop.is_set():
            if self.running():
                time.sleep(0.05)
                continue
            with self.lock:
                truth, paused = self.truth, self.paused
            if self.process is not None:
                lab.note(f"recorder ended ({self.process.returncode})")
                self.process = None
            if paused or truth is None or not lab.ready(truth.port):
                time.sleep(0.1)
                continue
            self.starts += 1
            path = os.path.join(lab.work, f"truth-{truth.number}-{self.starts:03d}.txt")
            truth.add_file(path)
            log.write(f"--- {time.time() - lab.t0:.3f} s: recording segment {truth.number} into {os.path.basename(path)}\n")
            self.process = lab.spawn(
                [os.path.join(lab.pg_bin, "pg_recvlogical"), "-h", "127.0.0.1", "-p", str(truth.port), "-U", "postgres", "-d", lab.db,
                 "-S", TRUTH_SLOT, "--start", "--no-loop", "-F", "0", "-s", "1", "-f", path,
                 "-o", "include-xids=1", "-o", "skip-empty-xacts=1", "-o", "include-timestamp=1"],
                stdout=log, stderr=log, env=dict(os.environ, PGOPTIONS="-c TimeZone=UTC"))
            time.sleep(0.2)
        log.close()

    def stop(self):
        with self.lock:
            self.paused = True
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# The lab

class Lab:
    def __init__(self):
        self.t0 = time.time()
        self.work = env("LAB_WORK")
        self.bin = env("LAB_BIN")
        self.pg_bin = env("LAB_PG_BIN")
        self.db = env("LAB_DB")
        self.rules = env("LAB_RULES")
        self.before = float(env("PG_FAULTS_BEFORE", "3"))
        self.after = float(env("PG_FAULTS_AFTER", "3"))
        self.deadline = float(env("PG_FAULTS_DEADLINE", "60"))
        self.writers = int(env("PG_FAULTS_WRITERS", "2"))
        self.pause_ms = int(env("PG_FAULTS_PAUSE_MS", "150"))
        self.max_batch = int(env("PG_FAULTS_MAX_BATCH", "8"))
        self.max_rows = int(env("PG_FAULTS_MAX_ROWS", "600"))
        self.pull_pause_ms = int(env("PG_FAULTS_PULL_PAUSE_MS", "300"))
        self.time_limit = float(env("PG_FAULTS_TIME_LIMIT", "900"))
        self.keep_going = bool(os.environ.get("PG_FAULTS_KEEP_GOING"))
        self.seed = int(env("PG_FAULTS_SEED", str(random.randrange(1 << 30))))
        self.rng = random.Random(self.seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.failures = []
        self.counts = {}
        self.children = set()
        self.pulling = set()       # devices inside a pull (and the reading of its state)
        self.pids = open(os.path.join(self.work, "pids"), "a", buffering=1)
        self.events = open(os.path.join(self.work, "events"), "a", buffering=1)
        self.primary = Cluster(self, env("LAB_PG_FOLDER"), int(env("LAB_PG_PORT")))
        self.clusters = [self.primary]
        self.proxy = None
        self.recorder = None
        self.servers = []
        self.urls = []
        self.truths = {}
        self.segment = 1
        # Writers: they write while `writing` is set; `busy` says who is inside a transaction.
        self.writing = threading.Event()
        self.write_lock = threading.Lock()
        self.busy = {}
        self.sessions = {}
        self.rows_now = 0
        # Devices: 'run' (pull, pause, pull), 'quiet' (pull until equal to `expected`), 'hold'.
        self.mode = "hold"
        self.expected = {}
        self.converged = {}
        self.pending = {name: [] for name, _, _ in DEVICES}
        self.last = {}
        self.checked = {name: 0 for name, _, _ in DEVICES}
        self.distinct = {name: 0 for name, _, _ in DEVICES}
        self.pointers = {}
        self.pulls = {}
        self.results = []
        self.self_tests = 0
        self.checkers = {}
        self.kept = {}             # segment -> how many commits of the timeline before it the new primary has
        self.durations = []

    # Bookkeeping

    def since(self, t):
        return f"{t - self.t0:.3f} s"

    def count(self, what, by=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + by

    def note(self, text):
        self.events.write(f"{time.time() - self.t0:9.3f} {text}\n")

    def say(self, text):
        print(f"{LAB}: {text}", flush=True)
        self.note(text.splitlines()[0])

    def fail(self, text):
        with self.lock:
            self.failures.append(text)
        print(f"{LAB}: FAILED: {text}", flush=True)
        self.note("FAILED " + text.splitlines()[0])

    def spawn(self, command, record=True, **options):
        """Starts a child; a long-lived one is written down for the lab's cleanup, in case this
        script is killed before it stops them."""
        process = subprocess.Popen(command, **options)
        if record:
            self.pids.write(f"{process.pid} {os.path.realpath(command[0])}\n")
        return process

    def as_postgres(self, command, timeout):
        try:
            result = subprocess.run(["runuser", "-u", "postgres", "--", *command], cwd="/", capture_output=True, text=True,
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"{os.path.basename(command[0])} {' '.join(command[1:])[:100]} did not end within {timeout} s")
        if result.returncode != 0:
            raise LabError(f"{os.path.basename(command[0])} {' '.join(command[1:])[:160]} failed ({result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-600:]}")
        return result

    def sql(self, statement, port=None, timeout=60):
        """Rows of one statement, run by psql straight on the primary (or `port`)."""
        command = [os.path.join(self.pg_bin, "psql"), "-h", "127.0.0.1", "-p", str(port or self.primary.port), "-U", "postgres",
                   "-d", self.db, "-X", "-q", "-At", "-F", "\x1f", "-v", "ON_ERROR_STOP=1", "-c", statement]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"psql did not end within {timeout} s: {statement[:100]}")
        if result.returncode != 0:
            raise LabError(f"psql failed: {statement[:100]}: {result.stderr.strip()[-400:]}")
        return [line.split("\x1f") for line in result.stdout.splitlines()]

    def ready(self, port):
        """PostgreSQL on `port` accepts connections (not shutting down, not starting)."""
        try:
            return subprocess.run([os.path.join(self.pg_bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-t", "2"],
                                  timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def wait_sql(self, statement, port=None, timeout=60, what="PostgreSQL"):
        """Runs `statement` until it answers 't' (PostgreSQL may still be starting)."""
        deadline = time.time() + timeout
        error = None
        while time.time() < deadline:
            try:
                rows = self.sql(statement, port, timeout=10)
                if rows and rows[0][0] == "t":
                    return
                error = f"answered {rows}"
            except LabError as e:
                error = str(e)
            time.sleep(0.05)
        raise LabError(f"{what} did not come within {timeout} s: {error}")

    def checker(self, truth):
        """The checker of `truth` as far as it is parsed (one replay of the log, kept until the
        log grows)."""
        cached = self.checkers.get(truth.key)
        if cached is None or len(cached.hashes[USERS[0]]) != len(truth.commits) + 1:
            cached = self.checkers[truth.key] = Checker(truth)
        return cached

    def timeline(self, number):
        """What the devices of segment `number` may show (see Timeline)."""
        kept = self.kept.get(number)
        if kept is None:
            return self.truths[number]
        return Timeline(number, self.timeline(number - 1), kept, self.truths[number])

    # Setup

    def snapshot(self, port=None):
        """The lab's tables now, read by psql: issues by id (columns as the table names them), and
        the memberships as (project, member)."""
        rows = self.sql("SELECT json_build_object('issues', (SELECT coalesce(json_agg(to_json(i)), '[]') FROM issues i), "
                        "'members', (SELECT coalesce(json_agg(json_build_array(project_id, member)), '[]') FROM project_members))",
                        port)
        data = json.loads(rows[0][0])
        return {row["id"]: row for row in data["issues"]}, {tuple(pair) for pair in data["members"]}

    def begin_segment(self, cluster):
        """Makes the truth slot on `cluster` and starts a segment from the tables' state then (no
        writer runs meanwhile)."""
        self.sql(f"SELECT pg_create_logical_replication_slot('{TRUTH_SLOT}', 'test_decoding')", cluster.port)
        issues, members = self.snapshot(cluster.port)
        truth = Truth(len(self.truths) + 1, cluster.port, issues, members)
        self.truths[truth.number] = truth
        self.recorder.target(truth)
        return truth

    def start_server(self, index):
        log_path = os.path.join(self.work, f"server{index}.log")
        with open(log_path, "a") as log:
            process = self.spawn([self.bin, "serve", "--port", "0", "--postgres", f"postgres://postgres@127.0.0.1:{self.proxy.port}/{self.db}",
                                  "--demo-accounts", "--sync-rules", self.rules] + (["--capture-stream"] if index == 0 else []),
                                 stdout=log, stderr=log)
        deadline = time.time() + 90
        while time.time() < deadline:
            found = re.search(r"listening on (127\.0\.0\.1:\d+)", open(log_path, errors="replace").read())
            if found:
                self.servers.append(process)
                self.urls.append(f"http://{found.group(1)}")
                return
            if process.poll() is not None:
                break
            time.sleep(0.1)
        process.kill()
        raise LabError(f"server {index} did not start; its log:\n" + open(log_path, errors="replace").read()[-3000:])

    # Writers

    def writer_session(self, name):
        if self.sessions.get(name) is None:
            command = [os.path.join(self.pg_bin, "psql"), "-h", "127.0.0.1", "-p", str(self.proxy.port), "-U", "postgres",
                       "-d", self.db, "-X", "-q", "-At"]
            self.sessions[name] = Psql(command, open(os.path.join(self.work, f"psql-{name}.err"), "a"), self.spawn)
        return self.sessions[name]

    def write(self, name, sql):
        """One transaction through a session of `name` (a new one if the last was lost: the
        proxy closes them when PostgreSQL goes or moves)."""
        try:
            return self.writer_session(name).run(sql)
        except RuntimeError:
            session = self.sessions.pop(name, None)
            session.close()
            self.count("writer sessions lost" if session.used else "writer connections refused")
            time.sleep(0.2)
            return None

    def writing_loop(self, name, transaction):
        while not self.stop.is_set():
            with self.write_lock:
                go = self.writing.is_set()
                self.busy[name] = go
            if not go:
                self.writing.wait(0.1)
                continue
            try:
                delay = transaction()
            except Exception as error:
                if not self.stop.is_set():
                    self.fail(f"writer {name} stopped: {error!r}")
                return
            finally:
                with self.write_lock:
                    self.busy[name] = False
            self.stop.wait(delay)

    def insert_batch(self, rng, prefix, number, project, tally):
        size = rng.randint(1, self.max_batch)
        batch = f"{prefix}-b{number}"
        rows = [f"({sql_text(f'{prefix}-{number}-{i}')}, {sql_text(project)}, {sql_text(f'issue {i + 1} of {batch}')}, "
                f"{sql_text(rng.choice(BODIES))}, 1, false, {sql_text(batch)}, {size})" for i in range(size)]
        tally += [("batches inserted", 1), ("rows inserted", size)]
        return "INSERT INTO issues (id, project_id, title, body, version, done, batch, batch_size) VALUES " + ", ".join(rows) + ";"

    def writer(self, index):
        rng = random.Random(self.seed * 100 + index)
        name = f"writer{index}"
        prefix = f"w{index}"
        state = {"number": 0, "transactions": 0}

        def transaction():
            if state["transactions"] % 20 == 0:
                answer = self.write(name, "SELECT count(*) FROM issues;")
                if answer:
                    self.rows_now = int(answer[-1])
            state["transactions"] += 1
            crowded = self.rows_now > self.max_rows
            insert, delete, move = (0.12, 0.30, 0.13) if crowded else (0.25, 0.15, 0.15)
            statements, tally = [], [("transactions", 1)]
            for _ in range(1 if rng.random() < 0.4 else rng.randint(2, 20)):
                action = rng.random()
                if action < insert:
                    state["number"] += 1
                    statements.append(self.insert_batch(rng, prefix, state["number"], rng.choice(PROJECTS), tally))
                elif action < insert + delete:
                    statements.append("DELETE FROM issues WHERE batch = (SELECT batch FROM issues ORDER BY random() LIMIT 1);")
                    tally.append(("batch deletions", 1))
                elif action < insert + delete + move:
                    statements.append(f"UPDATE issues SET project_id = {sql_text(rng.choice(PROJECTS))}, version = version + 1 "
                                      "WHERE batch = (SELECT batch FROM issues ORDER BY random() LIMIT 1);")
                    tally.append(("batch moves", 1))
                else:
                    statements.append(f"UPDATE issues SET version = version + 1, body = {sql_text(rng.choice(BODIES))}, "
                                      f"done = {rng.choice(['true', 'false', 'NOT done'])} "
                                      f"WHERE id IN (SELECT id FROM issues ORDER BY random() LIMIT {rng.randint(1, 3)});")
                    tally.append(("updates", 1))
                if rng.random() < 0.1:
                    statements.append(f"SELECT pg_sleep({rng.randint(1, 30) / 1000});")
            if self.write(name, "BEGIN;\n" + "\n".join(statements) + "\nCOMMIT;") is not None:
                for what, by in tally + [("statements", len(statements))]:
                    self.count(what, by)
            return rng.uniform(0, 2 * self.pause_ms) / 1000

        self.writing_loop(name, transaction)

    def memberships(self):
        rng = random.Random(self.seed * 100 + 99)
        state = {"number": 0}

        def toggle(user, project):
            # Whichever it is now, the other: the lab never has to know.
            return (f"WITH gone AS (DELETE FROM project_members WHERE project_id = '{project}' AND member = '{user}' RETURNING 1) "
                    f"INSERT INTO project_members SELECT '{project}', '{user}' WHERE NOT EXISTS (SELECT 1 FROM gone);")

        def transaction():
            picked = rng.sample(TOGGLES, 2 if rng.random() < 0.2 else 1)
            statements = [toggle(user, project) for user, project in picked]
            tally = [("membership transactions", 1), ("membership changes", len(picked)), ("transactions", 1)]
            if rng.random() < 0.35:
                state["number"] += 1
                batch = self.insert_batch(rng, "m", state["number"], picked[0][1], tally)
                statements = [batch] + statements if rng.random() < 0.5 else statements + [batch]
                tally.append(("batches with a membership change", 1))
            if self.write("memberships", "BEGIN;\n" + "\n".join(statements) + "\nCOMMIT;") is not None:
                for what, by in tally:
                    self.count(what, by)
            return rng.uniform(0.3, 1.2)

        self.writing_loop("memberships", transaction)

    def pause_writers(self, timeout=60):
        with self.write_lock:
            self.writing.clear()
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.write_lock:
                if not any(self.busy.values()):
                    return
            time.sleep(0.02)
        raise LabError(f"the writers did not pause within {timeout} s")

    def resume_writers(self):
        with self.write_lock:
            self.writing.set()

    # Devices

    def pull(self, name, user, server):
        """One `offline sync pull`: 'done', 'error' or 'hung' (not done within 60 s)."""
        with open(os.path.join(self.work, f"client-{name}.log"), "a") as log:
            log.write(f"--- {time.time() - self.t0:.3f} s: pull from server {server}\n")
            log.flush()
            child = self.spawn([self.bin, "sync", "pull", "--db", os.path.join(self.work, f"{name}.sqlite"), "--server", self.urls[server],
                                "--synced", COLLECTION, "--user", user, "--page-size", str(random.choice([10, 50, 200]))],
                               record=False, stdout=log, stderr=log)
            with self.lock:
                self.children.add(child)
            try:
                try:
                    return "done" if child.wait(timeout=60) == 0 else "error"
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    return "hung"
            finally:
                with self.lock:
                    self.children.discard(child)

    def device_state(self, name):
        path = os.path.join(self.work, f"{name}.sqlite")
        if not os.path.exists(path):
            return {}
        connection = sqlite3.connect(path, timeout=30)
        try:
            if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'synced_record'").fetchone():
                return {}
            return {id: canonical(json.loads(value)) for id, value in connection.execute("SELECT id, value FROM synced_record")}
        finally:
            connection.close()

    def device(self, name, user, first):
        rng = random.Random(self.seed * 100 + 50 + [d[0] for d in DEVICES].index(name))
        number = 0
        while not self.stop.is_set():
            mode = self.mode
            if mode == "hold" or (mode == "quiet" and name in self.converged):
                time.sleep(0.05)
                continue
            server = (first + number) % 2
            number += 1
            with self.lock:
                self.pulling.add(name)
            try:
                started, segment = time.time(), self.segment
                outcome = self.pull(name, user, server)
                ended = time.time()
                self.count(f"{name} pulls {outcome}")
                if outcome == "done":
                    entry = Entry(started, ended, server, segment, self.device_state(name))
                    with self.lock:
                        self.pending[name].append(entry)
                        self.last[name] = entry
                        if self.mode == "quiet" and name not in self.converged and entry.state == self.expected.get(user):
                            self.converged[name] = ended
                elif outcome == "hung":
                    self.note(f"{name}'s pull from server {server} hung 60 s")
            finally:
                with self.lock:
                    self.pulling.discard(name)
            time.sleep(0.1 if mode == "quiet" else rng.uniform(0, 2 * self.pull_pause_ms) / 1000)

    # Faults

    def capture_sessions(self):
        rows = self.sql(
            "SELECT pid, backend_type, coalesce(state, ''), left(replace(query, E'\\n', ' '), 60) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND ("
            "pid IN (SELECT active_pid FROM pg_replication_slots WHERE slot_name LIKE 'offlinekit\\_%' AND active_pid IS NOT NULL) "
            f"OR pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = {CAPTURE_LOCK}) "
            "OR query LIKE '%pg_logical_slot_peek_binary_changes%' OR query LIKE '%pg_replication_slot_advance%' "
            "OR query LIKE 'START_REPLICATION SLOT %offlinekit\\_%')")
        return rows

    def terminate_capture(self, number):
        deadline = time.time() + 10
        while time.time() < deadline:
            sessions = self.capture_sessions()
            if sessions:
                for pid, kind, state, query in sessions:
                    self.sql(f"SELECT pg_terminate_backend({pid})")
                return "terminated " + "; ".join(f"{pid} ({kind}, {state or 'no state'}: {query.strip()})" for pid, kind, state, query in sessions)
            time.sleep(0.05)
        self.fail(f"fault {number}: no capture session to terminate for 10 s (capture is not running: none holds its lock or "
                  "its slot, none reads the slot)")
        return "nothing terminated"

    def drop_slot(self, number):
        deadline = time.time() + 20
        while True:
            slots = self.sql("SELECT slot_name, coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name LIKE 'offlinekit\\_%'")
            if not slots:
                self.fail(f"fault {number}: capture has no offlinekit_% slot to drop (it did not make one again)")
                return "nothing dropped"
            name, pid = slots[0]
            if pid != "0":
                self.sql(f"SELECT pg_terminate_backend({pid})")
            try:
                self.sql(f"SELECT pg_drop_replication_slot('{name}')")
                return f"dropped {name}" + (f" (its reader {pid} terminated)" if pid != "0" else "")
            except LabError as error:
                if "is active" not in str(error) or time.time() > deadline:
                    raise
            time.sleep(0.02)

    def failover(self, number):
        folder = os.path.join(self.work, f"standby{len(self.clusters)}")
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, 0o755)
        subprocess.run(["chown", "postgres", folder], check=True)
        started = time.time()
        self.as_postgres([os.path.join(self.pg_bin, "pg_basebackup"), "-D", os.path.join(folder, "data"), "-R", "-X", "stream", "-c", "fast",
                          "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres"], 150)
        standby = None
        for _ in range(10):
            port = random.randint(30000, 59999)
            candidate = Cluster(self, folder, port)
            try:
                candidate.ctl("-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                                    "-c max_connections=200 -c wal_level=logical -c hot_standby=on", "start")
                standby = candidate
                break
            except LabError as error:
                last = error
        if standby is None:
            raise LabError(f"the standby did not start: {last}")
        self.clusters.append(standby)
        self.wait_sql("SELECT pg_is_in_recovery()", standby.port, what="the standby")
        backup = time.time() - started
        # The writers stop and the recorder reads the old primary's last commit.
        self.pause_writers()
        self.drain(f"failover-{number}")
        lsn = self.sql("SELECT pg_current_wal_lsn()")[0][0]
        self.wait_sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn", standby.port, timeout=60, what=f"the standby's replay of {lsn}")
        self.recorder.pause()
        old, old_truth = self.primary, self.truths[self.segment]
        old.ctl("-m", "immediate", "stop")
        self.note(f"old primary on {old.port} stopped -m immediate")
        standby.ctl("promote")
        self.wait_sql("SELECT NOT pg_is_in_recovery()", standby.port, what="the promoted standby")
        with self.lock:
            self.segment += 1
        self.primary = standby
        dropped = self.proxy.switch(standby.port)
        ended = time.time()
        self.recorder.wait_ended(10)
        old_truth.parse()
        truth = self.begin_segment(standby)
        previous = self.timeline(old_truth.number)
        kept = self.replayed_prefix(previous, truth)
        self.kept[truth.number] = kept
        if kept == len(previous.commits):
            lost = "holds every commit of the old primary"
        elif kept is not None:
            lost = f"holds the old primary's commits up to {label(previous, kept)}, {len(previous.commits) - kept} lost"
        else:
            lost = "holds no state of the old primary's log (its devices are checked against the new primary's log alone)"
        self.resume_writers()
        return ended, (f"base backup and standby up in {backup:.1f} s, old primary stopped -m immediate, standby on {standby.port} "
                       f"promoted, proxy moved ({dropped} connections closed); the new primary {lost}; "
                       f"segment {truth.number} of the truth begins")

    def replayed_prefix(self, previous, truth):
        """How many commits of `previous` the promoted standby holds: the last state of that log
        equal to the tables when the new segment began (None: none is)."""
        replay = Replay(previous)
        found = None
        while True:
            rows = {id: row[0] for id, row in replay.rows.items()}
            if rows == truth.issues and replay.members == truth.members:
                found = replay.index
            if replay.index == len(previous.commits):
                return found
            replay.step()

    def fault(self, number, kind):
        """Runs the fault; returns when it ended (PostgreSQL back, or the promotion done) and what happened."""
        if kind in ("fast", "immediate"):
            logged = os.path.getsize(self.primary.log) if os.path.exists(self.primary.log) else 0
            began = time.time()
            self.primary.ctl("-m", kind, "restart")
            what = f"PostgreSQL on {self.primary.port} restarted -m {kind} in {time.time() - began:.1f} s"
            # A fast shutdown waits until every walsender's client confirmed the WAL sent to it.
            with open(self.primary.log, errors="replace") as log:
                log.seek(logged)
                timeouts = re.findall(r"terminating walsender process due to replication timeout\n.*STATEMENT:\s*(.*)", log.read())
            if timeouts:
                what += (f"; it waited for wal_sender_timeout: PostgreSQL's log says \"terminating walsender process due to "
                         f"replication timeout\" for {'; '.join(timeouts)}")
            return time.time(), what
        if kind == "terminate":
            what = self.terminate_capture(number)
            return time.time(), what
        if kind == "slot-drop":
            what = self.drop_slot(number)
            return time.time(), what
        if kind == "failover":
            return self.failover(number)
        return time.time(), "no fault"

    # Quiet points

    def drain(self, marker, timeout=30):
        """Commits a marker on the primary and waits until the truth log holds it: the log then
        has every commit before it."""
        self.sql(f"INSERT INTO lab_marker VALUES ('{marker}')")
        truth = self.truths[self.segment]
        deadline = time.time() + timeout
        while time.time() < deadline:
            truth.parse()
            if marker in truth.markers:
                return truth
            time.sleep(0.1)
        raise LabError(f"the truth recorder did not record the marker {marker} within {timeout} s "
                       f"(recorder {'running' if self.recorder.running() else 'not running'}; {truth.status()})")

    def capture_diagnosis(self):
        lines = []
        try:
            for name, active, pid, behind in self.sql(
                    "SELECT slot_name, active, coalesce(active_pid, 0), pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
                    "FROM pg_replication_slots WHERE slot_name LIKE 'offlinekit\\_%'"):
                lines.append(f"slot {name}: active {active} (pid {pid}), confirmed {int(behind) / 1024:.0f} kB behind the WAL's end")
            if not lines:
                lines.append("no offlinekit_% slot")
            for through, behind in self.sql("SELECT through, pg_wal_lsn_diff(pg_current_wal_lsn(), "
                                            "(to_hex(through >> 32) || '/' || to_hex(through & 4294967295))::pg_lsn)::bigint FROM sync_feed_state"):
                lines.append(f"the feed has read through {through}, {int(behind) / 1024:.0f} kB behind the WAL's end")
            sessions = self.capture_sessions()
            lines.append("capture's sessions: " + ("; ".join(f"{pid} {kind} {state}: {query.strip()}" for pid, kind, state, query in sessions)
                                                   or "none"))
        except LabError as error:
            lines.append(f"(diagnosis failed: {error})")
        return lines

    def quiet(self, number, kind, fault_end):
        """Writers paused: every device pulls until it equals the truth; then the checks."""
        paused = time.time()
        truth = self.drain(f"quiet-{number}")
        issues, members = self.snapshot()
        # The log, replayed, must be the tables: else the recorder or its parser is wrong.
        checker = self.checker(truth)
        replayed = {id: row[0] for id, row in checker.final.rows.items()}
        if replayed != issues or checker.final.members != members:
            missing, extra, different = differences({id: canonical(c) for id, c in issues.items()},
                                                    {id: canonical(c) for id, c in replayed.items()})
            self.fail(f"the truth log replayed is not the tables read by psql at quiet point {number}: issues missing {missing[:5]}, "
                      f"extra {extra[:5]}, different {different[:5]}; memberships {sorted(members ^ checker.final.members)}")
        expected = {user: {id: canonical(issue_json(columns)) for id, columns in issues.items()
                           if (columns["project_id"], user) in members} for user in USERS}
        with self.lock:
            self.expected = expected
            self.converged = {}
            # A state already equal (a device that pulled after the writers paused) counts.
            for name, user, _ in DEVICES:
                entry = self.last.get(name)
                if entry and entry.started >= paused and entry.state == expected[user]:
                    self.converged[name] = entry.ended
            self.mode = "quiet"
        deadline = time.time() + self.deadline
        while time.time() < deadline and len(self.converged) < len(DEVICES) and not self.stop.is_set():
            time.sleep(0.05)
        with self.lock:
            self.mode = "hold"
            converged = dict(self.converged)
        while self.pulling:
            time.sleep(0.05)
        done = len(converged) == len(DEVICES)
        rows = ", ".join(f"{user} {len(expected[user])}" for user in USERS)
        if done:
            at = max(converged.values())
            took = at - fault_end
            self.results.append((kind, took))
            self.say(f"fault {number} ({KIND_NAMES[kind]}): converged in {took:.2f} s after the fault "
                     f"({at - paused:.2f} s after the writers paused; the fault took {self.durations[-1][1]:.2f} s); rows now: {rows}; every device: missing 0, extra 0, "
                     f"different 0, lost audience 0")
        else:
            self.results.append((kind, None))
            lines = []
            shown = {}
            for name, user, _ in DEVICES:
                entry = self.last.get(name)
                if entry is not None and name not in converged and entry.hash in shown:
                    lines.append(f"{name}: the same rows as {shown[entry.hash]} (last pull that ended with 0: "
                                 f"{entry.ended - fault_end:.2f} s after the fault, server {entry.server})")
                    continue
                if entry is not None:
                    shown.setdefault(entry.hash, name)
                if name in converged:
                    lines.append(f"{name}: equal to the truth {converged[name] - fault_end:.2f} s after the fault")
                    continue
                if entry is None:
                    lines.append(f"{name}: no pull ended with 0 yet")
                    continue
                summary, examples = describe_differences(expected[user], entry.state)
                projects = {project for project, member in members if member == user}
                lost = sum(1 for text in entry.state.values() if json.loads(text).get("project") not in projects)
                lines.append(f"{name}: the last pull that ended with 0 ended {entry.ended - fault_end:.2f} s after the fault "
                             f"({self.since(entry.ended)}, server {entry.server}): {user} may see {len(expected[user])} rows, the device "
                             f"holds {len(entry.state)}: {summary}, lost audience {lost}")
                lines += ["  " + line for line in examples]
            lines += ["capture: " + line for line in self.capture_diagnosis()]
            self.fail(f"fault {number} ({KIND_NAMES[kind]}): the devices did not equal the truth within {self.deadline:g} s of "
                      f"the writers' pause ({time.time() - fault_end:.1f} s after the fault, which took {self.durations[-1][1]:.2f} s):\n  " + "\n  ".join(lines))
        self.check_histories(number)

    # The history check

    def self_test(self, truth):
        """Plants a torn transaction and a step back from the real log: the checker must reject
        both, and accept the states around them in order."""
        checker = self.checker(truth)
        replay = Replay(truth)
        candidates = []
        while replay.index < len(truth.commits):
            commit = truth.commits[replay.index]
            before = {user: replay.projects(user) for user in USERS}
            ids_before = {id: replay.rows[id][0]["project_id"] for table, _, columns, old in commit.changes
                          if table == "issues" for id in [columns["id"]] if id in replay.rows}
            replay.step()
            for user in USERS:
                if replay.projects(user) != before[user]:
                    continue
                touched = {columns["id"] for table, _, columns, _ in commit.changes if table == "issues"
                           and (ids_before.get(columns["id"]) in before[user]
                                or (columns["id"] in replay.rows and replay.rows[columns["id"]][0]["project_id"] in before[user]))}
                if len(touched) >= 2:
                    candidates.append((replay.index, user))
        if not candidates:
            return None
        rng = random.Random(self.seed + len(truth.commits))
        rng.shuffle(candidates)
        final = len(truth.commits)
        for j, user in candidates[:20]:
            hashes = checker.hashes[user]
            first_final = checker.index[user][hashes[final]][0]
            if hashes[j - 1] == hashes[j] or hashes[final] == hashes[j - 1] or max(checker.index[user][hashes[j - 1]]) >= first_final:
                continue
            replay = Replay(truth)
            replay.to(j - 1)
            before = replay.visible(user)
            replay.to(j)
            after = replay.visible(user)
            replay.to(final)
            last = replay.visible(user)
            changed = sorted(id for id in before.keys() | after.keys() if before.get(id) != after.get(id))
            torn = dict(before)
            for id in changed[:len(changed) // 2]:
                if id in after:
                    torn[id] = after[id]
                else:
                    del torn[id]
            torn_entry = Entry(0, time.time() + 1, 0, truth.number, torn)
            if torn_entry.hash in checker.index[user]:
                continue

            def run(*states):
                entries = [Entry(0, time.time() + 1, 0, truth.number, state) for state in states]
                return checker.check([("self-test", user, entries)], {})

            accepted = run(before, before, after, after)
            rejected_torn = checker.check([("self-test", user, [Entry(0, time.time() + 1, 0, truth.number, before), torn_entry])], {})
            rejected_back = run(before, last, before)
            problems = []
            if accepted:
                problems.append(f"it rejected {user}'s views at #{j - 1} then #{j}: {accepted[0][3]}")
            if len(rejected_torn) != 1 or rejected_torn[0][2] is not torn_entry:
                problems.append(f"it did not reject (only) a torn commit #{j} ({len(changed) // 2} of {len(changed)} rows)")
            if len(rejected_back) != 1 or "steps back" not in rejected_back[0][3]:
                problems.append(f"it did not reject (only) a step back to #{j - 1} after #{final}: {[f[3] for f in rejected_back]}")
            commit = truth.commits[j - 1]
            return (f"{truth.key}, {len(truth.commits)} commits: accepts {user}'s views at #{j - 1} and #{j} "
                    f"(xid {commit.xid}, {len(changed)} of {user}'s rows changed); rejects #{j} torn ({len(changed) // 2} of "
                    f"{len(changed)} rows): \"{rejected_torn[0][3] if rejected_torn else '-'}\"; rejects a step back to #{j - 1} "
                    f"after #{final}: \"{rejected_back[0][3][:60] if rejected_back else '-'}…\""), problems
        return None

    def check_histories(self, number):
        with self.lock:
            taken = {name: entries for name, entries in self.pending.items()}
            self.pending = {name: [] for name, _, _ in DEVICES}
        segments = sorted({entry.segment for entries in taken.values() for entry in entries} | {self.segment})
        for segment in segments:
            if segment not in self.truths:
                continue
            self.truths[segment].parse()
            truth = self.timeline(segment)
            started = time.time()
            tested = self.self_test(truth)
            if tested is None:
                self.note(f"self-test: no commit of segment {segment} changes two rows a user sees yet")
            else:
                text, problems = tested
                self.self_tests += 1
                if problems or self.self_tests == 1:
                    self.say(f"checker self-test ({text})")
                if problems:
                    self.fail("the checker's self-test: " + "; ".join(problems))
            checker = self.checker(truth)
            pointers = self.pointers.setdefault(segment, {})
            if self.kept.get(segment) is not None:
                # The new primary's timeline shares its first `kept` commits with the old one: a
                # device goes on from where it was there (or from the promotion, if it had seen
                # commits the standby lost).
                for name, _, _ in DEVICES:
                    if name not in pointers:
                        pointers[name] = min(self.pointers.get(segment - 1, {}).get(name, 0), self.kept[segment])
            histories = [(name, user, [entry for entry in taken[name] if entry.segment == segment]) for name, user, _ in DEVICES]
            failures = checker.check(histories, pointers)
            states = 0
            for name, user, entries in histories:
                states += len(entries)
                self.checked[name] += len(entries)
                previous = None
                for entry in entries:
                    self.distinct[name] += entry.hash != previous
                    previous = entry.hash
            self.note(f"history check of quiet point {number}, segment {segment}: {states} states, {len(failures)} failures, "
                      f"{time.time() - started:.2f} s; pointers {pointers}")
            for device, user, entry, what, pointer in failures[:3]:
                high = bisect.bisect_right([c.at or 0 for c in truth.commits], entry.ended) + 5
                size, i, view = checker.closest(user, entry.state, pointer - 20, high)
                summary, examples = describe_differences(view, entry.state)
                self.fail(f"{device}'s state after a pull from server {entry.server} (started {self.since(entry.started)}, ended "
                          f"{self.since(entry.ended)}, {len(entry.state)} rows) {what}. Closest: {user}'s view at "
                          f"{checker.describe(i)}" + (f", committed at {self.since(truth.commits[i - 1].at)}" if i else "")
                          + f": {summary}\n  " + "\n  ".join(examples))
            if len(failures) > 3:
                self.fail(f"{len(failures) - 3} more states of segment {segment} fail the history check")

    # The run

    def plan(self):
        kinds = [kind.strip() for kind in env("PG_FAULTS_KINDS", ",".join(KINDS)).split(",") if kind.strip()]
        for kind in kinds:
            if kind not in KINDS + ["none"]:
                sys.exit(f"{LAB}: PG_FAULTS_KINDS names {kind!r}, not one of {', '.join(KINDS)}, none")
        counts = {kind: int(env(*COUNT_SETTINGS[kind])) if kind in kinds else 0 for kind in KINDS}
        # Each kind spread evenly over the run; the failovers near the end, two faults after the last.
        spread = sorted(((k + 0.5) / counts[kind], KINDS.index(kind), kind) for kind in KINDS[:-1] for k in range(counts[kind]))
        sequence = [kind for _, _, kind in spread]
        for f in range(counts["failover"]):
            sequence.insert(max(len(sequence) - 2 - 3 * f, (2 * len(sequence) + 2) // 3), "failover")
        return sequence or ["none"]

    def run(self):
        plan = self.plan()
        self.proxy = Proxy(self.primary.port)
        self.recorder = Recorder(self)
        self.begin_segment(self.primary)
        for index in (0, 1):
            # One at a time: two instances migrating an empty database at once would race.
            self.start_server(index)
        self.say(f"seed {self.seed}: proxy on {self.proxy.port} to PostgreSQL on {self.primary.port}, instances at "
                 f"{' and '.join(self.urls)} (the first streams capture's slot), truth slot {TRUTH_SLOT} (test_decoding)")
        self.say(f"{len(plan)} faults: " + ", ".join(f"{plan.count(kind)} {kind}" for kind in KINDS + ["none"] if kind in plan)
                 + f"; {self.before:g} s of writing before each, {self.after:g} s after, {self.deadline:g} s to converge; "
                 f"{self.writers} writers and the memberships' writer, devices {', '.join(d[0] for d in DEVICES)}")
        threads = [threading.Thread(target=self.writer, args=(i,), daemon=True) for i in range(self.writers)]
        threads.append(threading.Thread(target=self.memberships, daemon=True))
        threads += [threading.Thread(target=self.device, args=(name, user, first), daemon=True) for name, user, first in DEVICES]
        for thread in threads:
            thread.start()
        try:
            self.phases(plan)
        except LabError as error:
            self.fail(str(error))
        return self.summary(plan)

    def phases(self, plan):
        for number, kind in enumerate(plan, 1):
            if time.time() - self.t0 > self.time_limit:
                self.fail(f"the time limit of {self.time_limit:g} s passed before fault {number}")
                break
            for index, server in enumerate(self.servers):
                if server.poll() is not None:
                    raise LabError(f"server {index} exited ({server.returncode}); the end of its log:\n"
                                   + open(os.path.join(self.work, f"server{index}.log"), errors="replace").read()[-2000:])
            self.mode = "run"
            self.resume_writers()
            self.stop.wait(self.before)
            self.note(f"fault {number}: {kind}")
            began = time.time()
            ended, what = self.fault(number, kind)
            self.durations.append((kind, ended - began))
            self.note(f"fault {number} ended: {what}")
            if kind in ("failover", "slot-drop", "terminate") or number == 1:
                print(f"{LAB}: fault {number}: {what}", flush=True)
            self.stop.wait(max(0, ended + self.after - time.time()))
            self.pause_writers()
            self.quiet(number, kind, ended)
            if self.failures and not self.keep_going:
                break

    def summary(self, plan):
        elapsed = time.time() - self.t0
        c = self.counts
        errors = deadlocks = 0
        for name in os.listdir(self.work):
            if name.startswith("psql-") and name.endswith(".err"):
                text = open(os.path.join(self.work, name), errors="replace").read()
                errors += text.count("ERROR:") - text.count("current transaction is aborted")
                deadlocks += text.count("deadlock detected")
        self.say(f"writes: {c.get('transactions', 0)} transactions ({c.get('statements', 0)} statements), {c.get('batches inserted', 0)} "
                 f"batches ({c.get('rows inserted', 0)} rows) inserted, {c.get('updates', 0)} updates, {c.get('batch moves', 0)} batch "
                 f"moves, {c.get('batch deletions', 0)} batch deletions, {c.get('membership changes', 0)} membership changes in "
                 f"{c.get('membership transactions', 0)} transactions ({c.get('batches with a membership change', 0)} with a batch); {errors} transactions refused ({deadlocks} deadlocks), "
                 f"rolled back; {c.get('writer sessions lost', 0)} writer sessions lost to faults "
                 f"({c.get('writer connections refused', 0)} connections refused while PostgreSQL was away)")
        logs = ", ".join(f"segment {t.number}: {len(t.commits)} commits, {len(t.files)} recorder runs, {t.resent} sent again"
                         for t in self.truths.values())
        self.say(f"truth log: {logs}")
        self.say("pulls: " + ", ".join(f"{name} {c.get(f'{name} pulls done', 0)} ok/{c.get(f'{name} pulls error', 0)} failed"
                                       + (f"/{c.get(f'{name} pulls hung')} hung" if c.get(f'{name} pulls hung') else "")
                                       for name, _, _ in DEVICES))
        self.say("states checked: " + ", ".join(f"{name} {self.checked[name]} ({self.distinct[name]} changes)" for name, _, _ in DEVICES)
                 + f"; checker self-test passed {self.self_tests} times")
        run = [kind for kind, _ in self.results]
        parts = []
        for kind in KINDS + ["none"]:
            times = [took for k, took in self.results if k == kind and took is not None]
            failed = sum(1 for k, took in self.results if k == kind and took is None)
            if kind in run:
                lengths = [length for k, length in self.durations if k == kind]
                parts.append(f"{kind} ×{run.count(kind)}: " + (f"min {min(times):.2f} s, median {statistics.median(times):.2f} s, "
                                                               f"max {max(times):.2f} s" if times else "none converged")
                             + (f", {failed} did not converge" if failed else "")
                             + f" (the fault itself took {min(lengths):.1f}–{max(lengths):.1f} s)")
        self.say(f"faults run: {len(self.results)} of {len(plan)}; converged after the fault: " + "; ".join(parts))
        if self.self_tests == 0 and not self.failures:
            self.fail("the checker's self-test never ran (no commit changed two rows a user sees)")
        verdict = "FAIL" if self.failures else "PASS"
        self.say(f"{verdict} ({len(self.failures)} failures) in {elapsed:.0f} s")
        return 1 if self.failures else 0

    def shutdown(self):
        self.stop.set()
        with self.lock:
            children = list(self.children)
        for child in children:
            child.kill()
        for session in list(self.sessions.values()):
            session.close()
        if self.recorder:
            self.recorder.stop()
        for server in self.servers:
            if server.poll() is None:
                server.terminate()
        # A graceful shutdown may wait for a capture that hangs: not what this lab measures.
        deadline = time.time() + 3
        for server in self.servers:
            try:
                server.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if self.proxy:
            self.proxy.stop()


def main():
    if len(sys.argv) != 2 or sys.argv[1] != "run":
        sys.exit(__doc__)
    lab = Lab()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        status = lab.run()
    except LabError as error:
        lab.fail(str(error))
        status = 1
    finally:
        lab.shutdown()
    sys.exit(status)


if __name__ == "__main__":
    main()
