#!/usr/bin/env python3
"""The run and the checks of the psql writers lab (55-psql-writers.sh), which sets up PostgreSQL,
the app's tables, the rules file and two `offline serve` instances, then runs this with:

    psql_writers.py run

and its settings in the environment (LAB_* from the lab; SYNC_PSQL_* from the user, see the lab).

For SECONDS seconds, psql sessions that know nothing of OfflineKit write to the app's tables:
batches of messages inserted in one transaction (a random pg_sleep between two INSERTs), bodies
rewritten, whole batches deleted or moved to another workspace, and ben's memberships changed
(removed from w1 and added back, added to w2 for a while and removed), sometimes with a batch
posted to that workspace in the same transaction. Every LARGE_EVERY seconds one more session
inserts, moves or deletes a large batch (2,001 to 2,400 rows, in one statement): capture records
such a transaction in parts, and nobody may see it before its last. Meanwhile ana and ben pull `team_messages`
from the two instances into SQLite files with `offline sync pull --synced` (one run in three then
holds the live stream for up to 2 s, pulling what it announces), SIGKILLed at random points,
and the lab SIGKILLs instances (sometimes both at once) and starts them again on the same
database. After every pull that ended on its own, each batch the device holds must be whole
(as many rows as its batch_size) and ana, never in w3, must hold no message of w3. When the
writers stop, pulls run until each device equals exactly the rows its user may see now, field by
field (at most CONVERGE pulls, 0.5 s apart), and OfflineKit's own tables (the pages a pull keeps
aside, the rows a resync marks seen) keep no message the user may no longer see. Any violation
fails the run, saying what was found.
"""
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

LAB = "psql-writers"
COLLECTION = "team_messages"
WORKSPACES = ["w1", "w2", "w3"]
# Bodies that make the JSON encoder work: quotes, backslashes, newlines, non-ASCII, emoji.
BODIES = ["hello", 'she said "hi"', "back\\slash", "line one\nline two", "ünïcödé ✓", "emoji 🎉🙂", "tab\tand it's"]


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"{LAB}: {name} is not set (run scripts/labs/55-psql-writers.sh)")
    return value


def sql_text(text):
    return "'" + text.replace("'", "''") + "'"


class Psql:
    """One long-lived psql session fed statements on stdin; `run` waits until they are done."""

    def __init__(self, command, error_log):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=error_log, text=True, bufsize=1)

    def run(self, sql):
        self.process.stdin.write(sql + "\n\\echo __done__\n")
        self.process.stdin.flush()
        lines = []
        while True:
            line = self.process.stdout.readline()
            if line == "":
                raise RuntimeError("psql ended")
            line = line.rstrip("\n")
            if line == "__done__":
                return lines
            lines.append(line)

    def close(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()
            self.process.wait()


class Lab:
    def __init__(self):
        self.work = env("LAB_WORK")
        self.bin = env("LAB_BIN")
        self.psql_command = [env("LAB_PSQL"), "-h", "127.0.0.1", "-p", env("LAB_PG_PORT"), "-U", "postgres",
                             "-d", env("LAB_DB"), "-X", "-q", "-At"]
        self.pg_url = env("LAB_PG_URL")
        self.rules = env("LAB_RULES")
        self.urls = env("LAB_URLS").split()
        self.server_pids = [int(pid) for pid in env("LAB_SERVER_PIDS").split()]
        self.logs = env("LAB_SERVER_LOGS").split()
        self.seconds = float(env("SYNC_PSQL_SECONDS", "60"))
        self.writers = int(env("SYNC_PSQL_WRITERS", "4"))
        self.server_kills = int(env("SYNC_PSQL_SERVER_KILLS", "4"))
        self.kill_max_ms = int(env("SYNC_PSQL_KILL_MS", "1500"))
        self.converge_pulls = int(env("SYNC_PSQL_CONVERGE", "20"))
        self.capture_wait = float(env("SYNC_PSQL_CAPTURE_WAIT", "60"))
        self.max_batch = int(env("SYNC_PSQL_MAX_BATCH", "8"))
        self.pause_ms = int(env("SYNC_PSQL_PAUSE_MS", "150"))
        self.large_every = float(env("SYNC_PSQL_LARGE_EVERY", "8"))
        self.seed = int(env("SYNC_PSQL_SEED", str(random.randrange(1 << 30))))
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.failures = []
        self.counts = {}
        self.children = set()          # pulls running now, SIGKILLed on the way out
        self.started_servers = []      # instances this script started (restarts)
        self.events = open(os.path.join(self.work, "events"), "a", buffering=1)

    # Bookkeeping

    def count(self, what, by=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + by

    def note(self, text):
        self.events.write(f"{time.time():.3f} {text}\n")

    def fail(self, text):
        with self.lock:
            self.failures.append(text)
        self.note("FAILED " + text.splitlines()[0])

    def psql(self, name):
        return Psql(self.psql_command, open(os.path.join(self.work, f"psql-{name}.err"), "a"))

    # Writers

    def insert_batch(self, prefix, number, workspace, rng, split_sleep=True):
        """A transaction's statements inserting one batch into `workspace`."""
        size = rng.randint(1, self.max_batch)
        batch = f"{prefix}-b{number}"
        rows = [f"({sql_text(f'{prefix}-m{number}-{i}')}, {sql_text(workspace)}, {sql_text(rng.choice(['ana', 'ben', 'bot']))}, "
                f"{sql_text(rng.choice(BODIES))}, {sql_text(batch)}, {size})" for i in range(size)]
        cut = rng.randint(0, size) if split_sleep else size
        statements = []
        if cut > 0:
            statements.append("INSERT INTO messages (id, workspace_id, author_id, body, batch, batch_size) VALUES " + ", ".join(rows[:cut]) + ";")
        statements.append(f"SELECT pg_sleep({rng.randint(0, 50) / 1000});")
        if cut < size:
            statements.append("INSERT INTO messages (id, workspace_id, author_id, body, batch, batch_size) VALUES " + ", ".join(rows[cut:]) + ";")
        return statements, size

    def writer(self, index):
        rng = random.Random(self.seed * 100 + index)
        session = self.psql(f"writer{index}")
        prefix = f"x{index}"
        number = 0
        try:
            while not self.stop.is_set():
                action = rng.random()
                if action < 0.5:
                    number += 1
                    statements, size = self.insert_batch(prefix, number, rng.choice(WORKSPACES), rng)
                    session.run("BEGIN;\n" + "\n".join(statements) + "\nCOMMIT;")
                    self.count("batches inserted")
                    self.count("rows inserted", size)
                    self.count("transactions")
                elif action < 0.72:
                    # Bodies only: a batch's rows stay its rows.
                    edited = rng.randint(1, 4)
                    session.run(f"BEGIN;\nUPDATE messages SET body = {sql_text(rng.choice(BODIES) + ' #' + str(rng.randrange(10**6)))} "
                                f"WHERE id IN (SELECT id FROM messages ORDER BY random() LIMIT {edited});\n"
                                f"SELECT pg_sleep({rng.randint(0, 50) / 1000});\nCOMMIT;")
                    self.count("body updates")
                    self.count("transactions")
                elif action < 0.84:
                    session.run("DELETE FROM messages WHERE batch = (SELECT batch FROM messages WHERE batch NOT LIKE 'L-%' "
                                "ORDER BY random() LIMIT 1);")
                    self.count("batch deletions")
                    self.count("transactions")
                else:
                    # A whole batch to another workspace: it leaves one audience and joins another.
                    session.run(f"UPDATE messages SET workspace_id = {sql_text(rng.choice(WORKSPACES))} "
                                "WHERE batch = (SELECT batch FROM messages WHERE batch NOT LIKE 'L-%' ORDER BY random() LIMIT 1);")
                    self.count("batch moves")
                    self.count("transactions")
                time.sleep(rng.randint(0, 2 * self.pause_ms) / 1000)
        except Exception as error:
            if not self.stop.is_set():
                self.fail(f"writer {index} stopped: {error}")
        finally:
            session.close()

    def large(self):
        """A large batch inserted, moved or deleted every LARGE_EVERY seconds: two at most at once
        (the other writers leave them alone, but rewrite their bodies)."""
        rng = random.Random(self.seed * 100 + 98)
        session = self.psql("large")
        number = 0
        try:
            while not self.stop.wait(rng.uniform(0.5, 1.5) * self.large_every):
                held = session.run("SELECT DISTINCT batch FROM messages WHERE batch LIKE 'L-%' ORDER BY 1;")
                action = "insert" if len(held) < 2 and (not held or rng.random() < 0.5) else rng.choice(["move", "move", "delete"])
                if action == "insert":
                    number += 1
                    size = rng.randint(2_001, 2_400)
                    session.run("INSERT INTO messages (id, workspace_id, author_id, body, batch, batch_size) "
                                f"SELECT 'L-m{number}-' || i, {sql_text(rng.choice(WORKSPACES))}, 'bot', 'large #' || i, 'L-b{number}', {size} "
                                f"FROM generate_series(0, {size - 1}) AS i;")
                    self.count("batches inserted")
                    self.count("rows inserted", size)
                elif action == "move":
                    session.run(f"UPDATE messages SET workspace_id = {sql_text(rng.choice(WORKSPACES))} WHERE batch = {sql_text(rng.choice(held))};")
                    self.count("batch moves")
                else:
                    session.run(f"DELETE FROM messages WHERE batch = {sql_text(rng.choice(held))};")
                    self.count("batch deletions")
                self.count("large batch " + action + "s")
                self.count("transactions")
                self.note(f"large batch {action}")
        except Exception as error:
            if not self.stop.is_set():
                self.fail(f"the large batches' writer stopped: {error}")
        finally:
            session.close()

    def memberships(self):
        """Ben leaves w1 and comes back, joins w2 and leaves it, all along."""
        rng = random.Random(self.seed * 100 + 99)
        session = self.psql("memberships")
        member = {"w1": True, "w2": False}
        number = 0
        try:
            while not self.stop.wait(rng.uniform(0.3, 2.0)):
                workspace = rng.choice(["w1", "w2"])
                change = (f"DELETE FROM memberships WHERE user_id = 'ben' AND workspace_id = '{workspace}';" if member[workspace]
                          else f"INSERT INTO memberships (user_id, workspace_id) VALUES ('ben', '{workspace}');")
                statements = [change]
                if rng.random() < 0.3:
                    # The membership and a batch of that workspace in one transaction.
                    number += 1
                    batch, size = self.insert_batch("mb", number, workspace, rng)
                    statements = rng.choice([[change] + batch, batch + [change]])
                    self.count("batches inserted")
                    self.count("rows inserted", size)
                session.run("BEGIN;\n" + "\n".join(statements) + "\nCOMMIT;")
                member[workspace] = not member[workspace]
                self.count("transactions")
                self.count("ben move-ins" if member[workspace] else "ben move-outs")
                self.note(f"ben {'joins' if member[workspace] else 'leaves'} {workspace}")
        except Exception as error:
            if not self.stop.is_set():
                self.fail(f"the membership writer stopped: {error}")
        finally:
            session.close()

    # Clients

    def pull_command(self, user, server, follow=0):
        return [self.bin, "sync", "pull", "--db", os.path.join(self.work, f"{user}.sqlite"), "--server", self.urls[server],
                "--synced", COLLECTION, "--user", user, "--page-size", str(random.choice([10, 50, 200])),
                "--follow", f"{follow:.2f}"]

    def pull(self, user, server, kill_after=None, timeout=60, follow=0):
        """Runs one pull (then holds the live stream for `follow` seconds, pulling what it
        announces); 'killed', 'done', 'error' or 'hung' (not done within `timeout`)."""
        with open(os.path.join(self.work, f"client-{user}.log"), "a") as log:
            log.write(f"--- pull from server {server}{f', following {follow:.2f} s' if follow else ''}"
                      f"{'' if kill_after is None else f', SIGKILL after {kill_after:.3f} s'}\n")
            log.flush()
            child = subprocess.Popen(self.pull_command(user, server, follow), stdout=log, stderr=log)
            with self.lock:
                self.children.add(child)
            try:
                wait = timeout if kill_after is None else kill_after
                try:
                    status = child.wait(timeout=wait)
                    return "done" if status == 0 else "error"
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    return "killed" if kill_after is not None else "hung"
            finally:
                with self.lock:
                    self.children.discard(child)

    def rows(self, user):
        path = os.path.join(self.work, f"{user}.sqlite")
        if not os.path.exists(path):
            return {}
        connection = sqlite3.connect(path, timeout=30)
        try:
            if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'synced_record'").fetchone():
                return {}
            return {id: json.loads(value) for id, value in connection.execute("SELECT id, value FROM synced_record")}
        finally:
            connection.close()

    def check_whole(self, user, when):
        """Every batch the device holds is whole; ana holds nothing of w3. Returns batches seen."""
        rows = self.rows(user)
        batches = {}
        for id, value in rows.items():
            batches.setdefault(value.get("batch"), []).append((id, value))
        problems = []
        for batch, members in sorted(batches.items(), key=lambda item: str(item[0])):
            sizes = {value.get("batchSize") for _, value in members}
            if len(sizes) != 1 or len(members) != next(iter(sizes)):
                problems.append(f"batch {batch}: {len(members)} rows held, batch_size {sorted(sizes, key=str)}: "
                                + ", ".join(f"{id} ({value.get('workspace')})" for id, value in sorted(members)))
        if user == "ana":
            for id, value in sorted(rows.items()):
                if value.get("workspace") == "w3":
                    problems.append(f"ana, never a member of w3, holds its message {id}")
        if problems:
            self.fail(f"{user}'s table after {when}: {len(problems)} violations:\n  " + "\n  ".join(problems[:20])
                      + self.diagnosis(user, [batch for batch, members in batches.items()
                                               if len(members) != members[0][1].get("batchSize")][:3]))
        return len(batches)

    def diagnosis(self, user, batches):
        """What the database and the feed hold now for `batches`, and the user's memberships."""
        if not batches:
            return ""
        session = self.psql("check")
        quoted = ", ".join(sql_text(batch) for batch in batches)
        try:
            lines = ["-- the database now, messages of those batches (id|workspace|body):"]
            lines += session.run(f"SELECT id, workspace_id, body FROM messages WHERE batch IN ({quoted}) ORDER BY id;")
            lines += [f"-- {user}'s memberships now:"]
            lines += session.run(f"SELECT workspace_id FROM memberships WHERE user_id = {sql_text(user)} ORDER BY 1;")
            lines += ["-- the feed's rows for those messages (collection|audience|id|position|deleted|value):"]
            # A batch's ids are its writer's prefix and number: batch x0-b7 has x0-m7-0, x0-m7-1, ...
            patterns = ", ".join(sql_text(batch.replace("-b", "-m", 1) + "-%") for batch in batches)
            lines += session.run("SELECT collection, audience, id, position, value IS NULL, convert_from(value, 'UTF8') FROM sync_change "
                                 f"WHERE id LIKE ANY (ARRAY[{patterns}]) ORDER BY id, audience;")
            lines += [f"-- the feed's rows naming {user} outside team_messages (collection|audience|id|position|deleted):"]
            lines += session.run("SELECT collection, audience, id, position, value IS NULL FROM sync_change "
                                 f"WHERE collection <> 'team_messages' AND (id LIKE {sql_text('%' + user + '%')} OR audience LIKE {sql_text('%' + user + '%')}) "
                                 "ORDER BY position DESC LIMIT 20;")
            lines += ["-- the feed's state (epoch|head|next|horizon|through):"]
            lines += session.run("SELECT epoch, head, next, horizon, through FROM sync_feed_state;")
        except Exception as error:
            lines.append(f"(diagnosis failed: {error})")
        finally:
            session.close()
        return "\n  " + "\n  ".join(lines)

    def client(self, user, home):
        rng = random.Random(self.seed * 100 + (50 if user == "ana" else 51))
        while not self.stop.is_set():
            server = home if rng.random() < 0.75 else 1 - home
            # One run in three holds the live stream for a while after its pull, as an app on
            # screen does, and is SIGKILLed as often (its kill comes at any point of it).
            follow = rng.uniform(0.5, 2.0) if rng.random() < 0.33 else 0
            kill_after = rng.randint(0, self.kill_max_ms + int(follow * 1000)) / 1000 if rng.random() < 0.6 else None
            outcome = self.pull(user, server, kill_after, follow=follow)
            if follow:
                self.count(f"{user} follows {outcome}")
            self.count(f"{user} pulls {outcome}")
            self.note(f"{user} pull from server {server}: {outcome}")
            if outcome == "done":
                self.count("batch checks")
                self.count("batches checked", self.check_whole(user, f"a pull from server {server} that ended on its own"))
            elif outcome == "hung":
                self.fail(f"{user}'s pull from server {server} did not end within 60 s")

    # Servers

    def accepts(self, index):
        port = int(self.urls[index].rsplit(":", 1)[1])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def start_server(self, index):
        port = self.urls[index].rsplit(":", 1)[1]
        with open(self.logs[index], "a") as log:
            log.write(f"=== restarted by the lab at {time.time():.3f}\n")
            log.flush()
            # As the lab started it: the first instance streams capture's slot, the second polls it.
            process = subprocess.Popen([self.bin, "serve", "--port", port, "--postgres", self.pg_url, "--demo-accounts",
                                        "--sync-rules", self.rules] + (["--capture-stream"] if index == 0 else []),
                                       stdout=log, stderr=log)
        self.started_servers.append(process)
        self.server_pids[index] = process.pid
        with open(os.path.join(self.work, "server-pids"), "a") as pids:
            pids.write(f"{process.pid}\n")
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.accepts(index):
                return True
            if process.poll() is not None:
                break
            time.sleep(0.1)
        self.fail(f"server {index} did not start again; the end of its log:\n" + "".join(open(self.logs[index]).readlines()[-20:]))
        return False

    def kill_server(self, index):
        try:
            os.kill(self.server_pids[index], signal.SIGKILL)
        except ProcessLookupError:
            pass
        for process in self.started_servers:
            if process.pid == self.server_pids[index]:
                process.wait()

    def server_killer(self):
        rng = random.Random(self.seed * 100 + 98)
        if self.server_kills == 0:
            return
        slot = self.seconds / self.server_kills
        for kill in range(self.server_kills):
            at = self.start + slot * kill + rng.uniform(0.15, 0.85) * slot
            if self.stop.wait(max(0, at - time.time())):
                return
            victims = [0, 1] if rng.random() < 0.3 else [kill % 2]
            for index in victims:
                self.kill_server(index)
            self.note(f"SIGKILL server {victims}")
            self.count("servers SIGKILLed", len(victims))
            if len(victims) == 2:
                self.count("both instances down at once")
            time.sleep(rng.uniform(0, 1.0))
            for index in victims:
                if not self.start_server(index):
                    return
            self.note(f"server {victims} serving again")

    # The run

    def expected(self, user):
        session = self.psql("check")
        try:
            lines = session.run(
                "SELECT coalesce(json_agg(json_build_object('id', id, 'workspace', workspace_id, 'author', author_id, 'text', body, "
                "'batch', batch, 'batchSize', batch_size)), '[]') FROM messages "
                f"WHERE workspace_id IN (SELECT workspace_id FROM memberships WHERE user_id = '{user}');")
        finally:
            session.close()
        return {row["id"]: row for row in json.loads("\n".join(lines))}

    def capture_lag(self):
        """Bytes of WAL flushed that capture has not confirmed reading yet (None: no slot)."""
        session = self.psql("check")
        try:
            lines = session.run("SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), confirmed_flush_lsn)::bigint "
                                "FROM pg_replication_slots WHERE slot_name LIKE 'offlinekit_%';")
        finally:
            session.close()
        return int(lines[0]) if lines and lines[0] else None

    def await_capture(self):
        """Waits until capture has read every commit of the writers; says how long that took."""
        start = time.time()
        target = self.psql("check")
        try:
            end = target.run("SELECT pg_current_wal_flush_lsn();")[0]
        finally:
            target.close()
        first = None
        while time.time() - start < self.capture_wait:
            session = self.psql("check")
            try:
                lines = session.run(f"SELECT pg_wal_lsn_diff('{end}', confirmed_flush_lsn)::bigint FROM pg_replication_slots "
                                    "WHERE slot_name LIKE 'offlinekit_%';")
            finally:
                session.close()
            behind = int(lines[0]) if lines and lines[0] else None
            first = behind if first is None else first
            if behind is not None and behind <= 0:
                print(f"{LAB}: capture was {first / 1024:.0f} kB of WAL behind when the writers stopped, "
                      f"read it all {time.time() - start:.1f} s later", flush=True)
                return True
            time.sleep(0.5)
        self.fail(f"capture did not read the writers' last commit within {self.capture_wait:g} s "
                  f"(still {behind if behind is not None else '?'} bytes of WAL behind, {first} when the writers stopped)")
        return False

    def kept(self, user):
        """Ids of team_messages that OfflineKit's own tables hold besides the app's, by table: the
        pages a pull keeps aside (a SIGKILLed pull leaves some behind) and the rows a resync marks
        seen. Held and base versions and conflicts need writes of the device's own, which this
        lab's devices do not make (MoveOutTests covers them)."""
        path = os.path.join(self.work, f"{user}.sqlite")
        connection = sqlite3.connect(path, timeout=30)
        try:
            kept = {}
            for table in ("offlinekit_sync_seen", "offlinekit_sync_staged"):
                if connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                    kept[table] = {id for (id,) in connection.execute(f"SELECT id FROM {table} WHERE collection = ?", (COLLECTION,))}
            return kept
        finally:
            connection.close()

    def check_kept(self, user, expected):
        """Nothing of a message the user may not see stays in OfflineKit's tables."""
        for table, ids in sorted(self.kept(user).items()):
            stray = sorted(ids - set(expected))
            print(f"{LAB}: {user}: {table} holds {len(ids)} ids, {len(stray)} of messages the rules no longer allow")
            if stray:
                self.fail(f"{user}'s {table} keeps messages of a workspace the user left: {stray[:10]}")

    def compare(self, user):
        expected, held = self.expected(user), self.rows(user)
        missing = sorted(set(expected) - set(held))
        extra = sorted(set(held) - set(expected))
        different = sorted(id for id in set(expected) & set(held) if expected[id] != held[id])
        return expected, held, missing, extra, different

    def converge(self):
        for attempt in range(1, self.converge_pulls + 1):
            for user, home in (("ana", 0), ("ben", 1)):
                server = (home + attempt) % 2
                outcome = self.pull(user, server)
                if outcome != "done":
                    self.fail(f"{user}'s pull from server {server} after the writers stopped ended {outcome}; "
                              f"the end of its log:\n" + "".join(open(os.path.join(self.work, f"client-{user}.log")).readlines()[-15:]))
                    return False
                self.count("batch checks")
                self.count("batches checked", self.check_whole(user, f"pull {attempt} from server {server} after the writers stopped"))
            results = {user: self.compare(user) for user in ("ana", "ben")}
            if all(not (missing or extra or different) for _, _, missing, extra, different in results.values()):
                for user, (expected, held, _, _, _) in results.items():
                    print(f"{LAB}: {user}: rules allow {len(expected)} messages now, table holds {len(held)}: "
                          f"missing 0, extra 0, different 0")
                    self.check_kept(user, expected)
                print(f"{LAB}: caught up after {attempt} pulls each")
                return True
            time.sleep(0.5)
        for user, (expected, held, missing, extra, different) in results.items():
            print(f"{LAB}: {user}: rules allow {len(expected)} messages now, table holds {len(held)}: "
                  f"missing {len(missing)}, extra {len(extra)}, different {len(different)}")
            lines = ([f"missing {id}: {json.dumps(expected[id], ensure_ascii=False)}" for id in missing[:10]]
                     + [f"extra {id}: {json.dumps(held[id], ensure_ascii=False)}" for id in extra[:10]]
                     + [f"different {id}: server {json.dumps(expected[id], ensure_ascii=False)}, device {json.dumps(held[id], ensure_ascii=False)}"
                        for id in different[:10]])
            if lines:
                self.fail(f"{user}'s table is not the rows the rules allow after {self.converge_pulls} pulls:\n  " + "\n  ".join(lines))
        return False

    def run(self):
        print(f"{LAB}: seed {self.seed}: {self.writers} psql writers and ben's memberships for {self.seconds:g} s, "
              f"ana and ben pulling from {' and '.join(self.urls)} (SIGKILLs up to {self.kill_max_ms} ms), "
              f"{self.server_kills} server kills", flush=True)
        self.start = time.time()
        threads = [threading.Thread(target=self.writer, args=(i,), daemon=True) for i in range(self.writers)]
        threads.append(threading.Thread(target=self.memberships, daemon=True))
        if self.large_every > 0:
            threads.append(threading.Thread(target=self.large, daemon=True))
        clients = [threading.Thread(target=self.client, args=(user, home), daemon=True) for user, home in (("ana", 0), ("ben", 1))]
        killer = threading.Thread(target=self.server_killer, daemon=True)
        for thread in threads + clients + [killer]:
            thread.start()
        lags = []
        while time.time() - self.start < self.seconds and not self.failures:
            time.sleep(1)
            lag = self.capture_lag()
            if lag is not None:
                lags.append(lag)
                self.note(f"capture {lag} bytes behind")
        self.stop.set()
        for thread in threads + clients + [killer]:
            while thread.is_alive():
                thread.join(timeout=0.2)
        writing = time.time() - self.start
        for index in (0, 1):
            if not self.accepts(index):
                self.kill_server(index)
                self.start_server(index)
        errors = sum(open(os.path.join(self.work, name)).read().count("ERROR:")
                     for name in os.listdir(self.work) if name.startswith("psql-") and name.endswith(".err"))
        deadlocks = sum(open(os.path.join(self.work, name)).read().count("deadlock detected")
                        for name in os.listdir(self.work) if name.startswith("psql-") and name.endswith(".err"))
        c = self.counts
        print(f"{LAB}: {writing:.0f} s of writing ({c.get('transactions', 0) / writing:.0f} transactions/s): {c.get('batches inserted', 0)} batches ({c.get('rows inserted', 0)} rows) inserted, "
              f"{c.get('body updates', 0)} body updates, {c.get('batch deletions', 0)} batch deletions, {c.get('batch moves', 0)} batch moves, "
              f"ben {c.get('ben move-outs', 0)} move-outs and {c.get('ben move-ins', 0)} move-ins; large batches (2,001-2,400 rows): "
              f"{c.get('large batch inserts', 0)} inserted, {c.get('large batch moves', 0)} moved, {c.get('large batch deletes', 0)} deleted; "
              f"{errors} statements refused by PostgreSQL ({deadlocks} deadlocks, rolled back)")
        for user in ("ana", "ben"):
            print(f"{LAB}: {user}: {c.get(f'{user} pulls killed', 0)} pulls SIGKILLed, {c.get(f'{user} pulls done', 0)} ended on their own, "
                  f"{c.get(f'{user} pulls error', 0)} ended with an error (server down); of them, holding the live stream: "
                  f"{c.get(f'{user} follows killed', 0)} SIGKILLed, {c.get(f'{user} follows done', 0)} on their own")
        if lags:
            print(f"{LAB}: capture's lag sampled every second: median {sorted(lags)[len(lags) // 2] / 1024:.0f} kB of WAL, "
                  f"largest {max(lags) / 1024:.0f} kB")
        print(f"{LAB}: {c.get('servers SIGKILLed', 0)} server SIGKILLs ({c.get('both instances down at once', 0)} with both down at once)")
        if not self.failures and self.await_capture():
            self.converge()
        c = self.counts
        print(f"{LAB}: {c.get('batch checks', 0)} tables checked after pulls that ended on their own, "
              f"{c.get('batches checked', 0)} batches found whole")
        if self.failures:
            for failure in self.failures:
                print(f"{LAB}: FAILED: {failure}")
            return 1
        return 0

    def shutdown(self):
        self.stop.set()
        with self.lock:
            children = list(self.children)
        for child in children:
            child.kill()
        for process in self.started_servers:
            if process.poll() is None:
                process.kill()
                process.wait()


def main():
    if len(sys.argv) != 2 or sys.argv[1] != "run":
        sys.exit(__doc__)
    lab = Lab()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        status = lab.run()
    finally:
        lab.shutdown()
    sys.exit(status)


if __name__ == "__main__":
    main()
