"""A loopback fake of the Neon API v2 whose branches are real PostgreSQL.

Usage: neon_fake.py PG_BIN_DIR API_KEY

Prints one line, `listening <api url>`, then serves until stdin closes or
it gets SIGTERM, and then stops every cluster it started and removes them.

What it implements (the documented subset the neon plugin uses, in Neon's
JSON shapes): `POST /api/v2/projects`; per project `GET .../branches`,
`POST .../branches` (`parent_id`, `parent_lsn`, `protected`, `endpoints`),
`PATCH`/`DELETE .../branches/{id}`, `POST .../branches/{id}/restore`
(`source_branch_id`, `source_lsn`), `GET`/`POST .../branches/{id}/databases`,
`GET`/`POST .../endpoints` (one `read_write` endpoint per branch: a second is
refused with 409), `GET .../connection_uri`, `GET .../operations/{id}`. Every
mutation answers with operations that are `running` until the first time
they are polled. Every request must carry `Authorization: Bearer API_KEY`
(else 401), and no answer ever repeats it. Connection URIs hold the role's
real password, as Neon's do (the host takes it out before the plugin sees
the response): a client connects to the branch's PostgreSQL with them.

How faithful branching is: each branch is its own PostgreSQL cluster,
made with `pg_basebackup` from its parent's running cluster, so a branch
really continues its parent's WAL (LSNs) and transaction ids, and siblings
diverge from the branch point as Neon timelines do. What is not faithful:
a branch is always cut at the parent's *current* head. A `parent_lsn` (or
restore `source_lsn`) ahead of the parent's head is refused as Neon
refuses it, one at the head is exact, and one in the past is accepted and
recorded but the copy still has the parent's later writes (the fake keeps
no WAL history to replay to it). Endpoints are the branch cluster's port on
127.0.0.1 (no per-endpoint hostname, no TLS, no suspend); a `read_only`
endpoint's URI sets `default_transaction_read_only`. Roles are real login
roles with `pg_read_all_stats` (so `pg_stat_activity` shows other sessions,
as Neon's `neon_superuser` does).
"""

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

PG_BIN = sys.argv[1]
API_KEY = sys.argv[2]
ADMIN = "tether"
ROOT = os.geteuid() == 0
LOCK = threading.RLock()
BASE = tempfile.mkdtemp(prefix="neon-fake-")
SOCK = os.path.join(BASE, "sock")
os.makedirs(SOCK)


def as_pg():
    """subprocess arguments that run as the postgres user when we are root."""
    return {"user": "postgres", "group": "postgres"} if ROOT else {}


def chown(path):
    if ROOT:
        subprocess.run(["chown", "-R", "postgres:postgres", path], check=True)


chown(BASE)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rid(prefix):
    return f"{prefix}-{secrets.token_hex(4)}-{secrets.token_hex(3)}"


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def lsn_value(lsn):
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


class Cluster:
    """One PostgreSQL server: a branch's storage and compute."""

    def __init__(self, data):
        self.data = data
        self.port = free_port()
        self.proc = None

    def start(self):
        if self.proc is not None:
            return
        log = open(os.path.join(BASE, f"pg-{self.port}.log"), "ab")
        self.proc = subprocess.Popen(
            [
                os.path.join(PG_BIN, "postgres"), "-D", self.data, "-p", str(self.port),
                "-k", SOCK, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                # Commits wait for their WAL to be written, as on Neon (where
                # they wait for the safekeepers): `pg_current_wal_lsn()` then
                # holds still once writes are done, so two objects on one
                # branch probe the same LSN.
                "-c", "synchronous_commit=on", "-c", "full_page_writes=off",
                "-c", "shared_buffers=8MB", "-c", "max_connections=40",
                "-c", "max_wal_senders=4", "-c", "wal_level=replica",
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, **as_pg(),
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            r = subprocess.run(
                [os.path.join(PG_BIN, "pg_isready"), "-q", "-h", SOCK, "-p", str(self.port)]
            )
            if r.returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"postgres on {self.data} did not start")

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def admin(self, dbname="postgres"):
        self.start()
        return psycopg.connect(host=SOCK, port=self.port, user=ADMIN, dbname=dbname, autocommit=True)

    def head(self):
        with self.admin() as c:
            return c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]

    def copy_to(self, data):
        """A new cluster at `data` holding this one's current state."""
        self.start()
        subprocess.run(
            [
                os.path.join(PG_BIN, "pg_basebackup"), "-D", data, "-h", SOCK,
                "-p", str(self.port), "-U", ADMIN, "-X", "stream", "-c", "fast", "-N",
            ],
            check=True, capture_output=True, **as_pg(),
        )
        return Cluster(data)


TEMPLATE = os.path.join(BASE, "template")


def init_template():
    pw = os.path.join(BASE, "pw")
    with open(pw, "w") as f:
        f.write(secrets.token_hex(16))
    chown(pw)
    subprocess.run(
        [
            os.path.join(PG_BIN, "initdb"), "-D", TEMPLATE, "-U", ADMIN,
            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pw}",
            "-E", "UTF8", "--locale=C", "--no-sync", "--wal-segsize=1",
        ],
        check=True, capture_output=True, **as_pg(),
    )


class ApiError(Exception):
    def __init__(self, status, message, code=""):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


# --- the control plane's state -------------------------------------------

PROJECTS = {}     # id -> project json
BRANCHES = {}     # id -> {"json": branch json, "cluster": Cluster}
ENDPOINTS = {}    # id -> endpoint json
ROLES = {}        # (project id, role) -> password
DATABASES = {}    # branch id -> [database json]
OPERATIONS = {}   # id -> operation json


def operation(project_id, action, branch_id=None, endpoint_id=None):
    op = {
        "id": rid("op"), "project_id": project_id, "branch_id": branch_id,
        "endpoint_id": endpoint_id, "action": action, "status": "running",
        "failures_count": 0, "created_at": now(), "updated_at": now(),
    }
    OPERATIONS[op["id"]] = op
    return op


def project_branches(pid):
    return [b for b in BRANCHES.values() if b["json"]["project_id"] == pid]


def branch(pid, bid):
    b = BRANCHES.get(bid)
    if b is None or b["json"]["project_id"] != pid:
        raise ApiError(404, f"branch {bid} not found", "NOT_FOUND")
    return b


def project(pid):
    p = PROJECTS.get(pid)
    if p is None:
        raise ApiError(404, f"project {pid} not found", "NOT_FOUND")
    return p


def children(bid):
    return [b for b in BRANCHES.values() if b["json"].get("parent_id") == bid]


def check_name_free(pid, name, but=None):
    for b in project_branches(pid):
        if b["json"]["name"] == name and b["json"]["id"] != but:
            raise ApiError(409, f"branch with name {name!r} already exists", "BRANCH_ALREADY_EXISTS")


def check_lsn(parent, lsn):
    if lsn is None:
        return parent["cluster"].head()
    head = parent["cluster"].head()
    if lsn_value(lsn) > lsn_value(head):
        raise ApiError(400, f"parent_lsn {lsn} is ahead of the parent's head {head}", "BAD_REQUEST")
    return lsn


def new_endpoint(pid, bid, kind):
    if kind not in ("read_write", "read_only"):
        raise ApiError(400, f"unknown endpoint type {kind!r}", "BAD_REQUEST")
    if kind == "read_write" and any(
        e["branch_id"] == bid and e["type"] == "read_write" for e in ENDPOINTS.values()
    ):
        raise ApiError(409, f"branch {bid} already has a read_write endpoint", "ENDPOINTS_LIMIT_EXCEEDED")
    b = branch(pid, bid)
    b["cluster"].start()
    ep = {
        "id": rid("ep"), "host": "127.0.0.1", "port": b["cluster"].port, "project_id": pid,
        "branch_id": bid, "type": kind, "current_state": "active", "pooler_enabled": False,
        "autoscaling_limit_min_cu": 0.25, "autoscaling_limit_max_cu": 0.25,
        "created_at": now(), "updated_at": now(),
    }
    ENDPOINTS[ep["id"]] = ep
    return ep


def create_project(body):
    name = (body.get("project") or {}).get("name") or rid("project")
    pid = "prj-" + secrets.token_hex(6)
    data = os.path.join(BASE, pid + "-main")
    shutil.copytree(TEMPLATE, data)
    chown(data)
    os.chmod(data, 0o700)
    cluster = Cluster(data)
    role, database = "neondb_owner", "neondb"
    password = "npg_" + secrets.token_hex(8)
    with cluster.admin() as c:
        if c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            c.execute(f'CREATE ROLE "{role}" LOGIN CREATEDB')
            c.execute(f'GRANT pg_read_all_stats TO "{role}"')
        c.execute(f"ALTER ROLE \"{role}\" PASSWORD '{password}'")
        c.execute(f'CREATE DATABASE "{database}" OWNER "{role}"')
    ROLES[(pid, role)] = password
    p = {
        "id": pid, "name": name, "platform_id": "fake", "region_id": "fake-loopback",
        "pg_version": 15, "history_retention_seconds": 86400, "created_at": now(),
        "updated_at": now(),
    }
    PROJECTS[pid] = p
    bid = "br-" + secrets.token_hex(6)
    b = {
        "id": bid, "project_id": pid, "name": "main", "current_state": "ready",
        "default": True, "primary": True, "protected": False, "created_at": now(),
        "updated_at": now(),
    }
    BRANCHES[bid] = {"json": b, "cluster": cluster}
    DATABASES[bid] = [{"id": 1, "branch_id": bid, "name": database, "owner_name": role}]
    ep = new_endpoint(pid, bid, "read_write")
    ops = [operation(pid, "create_timeline", bid), operation(pid, "start_compute", bid, ep["id"])]
    return {
        "project": p, "branch": b, "endpoints": [ep], "operations": ops,
        "roles": [{"branch_id": bid, "name": role, "password": password, "protected": False}],
        "databases": DATABASES[bid],
        "connection_uris": [{
            "connection_uri": uri(pid, ep, database, role),
            "connection_parameters": {
                "database": database, "password": password, "role": role,
                "host": ep["host"], "pooler_host": ep["host"],
            },
        }],
    }


def uri(pid, ep, database, role):
    password = ROLES.get((pid, role))
    if password is None:
        raise ApiError(404, f"role {role} not found", "NOT_FOUND")
    names = [d["name"] for d in DATABASES.get(ep["branch_id"], [])]
    if database not in names:
        raise ApiError(404, f"database {database} not found on branch {ep['branch_id']}", "NOT_FOUND")
    opts = f"-c neon.endpoint_id={ep['id']}"
    if ep["type"] == "read_only":
        opts += " -c default_transaction_read_only=on"
    query = urllib.parse.urlencode({"sslmode": "disable", "options": opts}, quote_via=urllib.parse.quote)
    return f"postgresql://{role}:{password}@{ep['host']}:{ep['port']}/{database}?{query}"


def create_branch(pid, body):
    project(pid)
    spec = body.get("branch") or {}
    parent_id = spec.get("parent_id") or next(
        b["json"]["id"] for b in project_branches(pid) if b["json"].get("default")
    )
    parent = branch(pid, parent_id)
    name = spec.get("name") or rid("br")
    check_name_free(pid, name)
    lsn = check_lsn(parent, spec.get("parent_lsn"))
    bid = "br-" + secrets.token_hex(6)
    cluster = parent["cluster"].copy_to(os.path.join(BASE, bid))
    b = {
        "id": bid, "project_id": pid, "parent_id": parent_id, "parent_lsn": lsn,
        "parent_timestamp": now(), "name": name, "current_state": "ready",
        "default": False, "primary": False, "protected": bool(spec.get("protected")),
        "created_at": now(), "updated_at": now(),
    }
    BRANCHES[bid] = {"json": b, "cluster": cluster}
    DATABASES[bid] = [dict(d, branch_id=bid) for d in DATABASES[parent_id]]
    ops = [operation(pid, "create_branch", bid)]
    eps = []
    for e in body.get("endpoints") or []:
        ep = new_endpoint(pid, bid, e.get("type", "read_write"))
        eps.append(ep)
        ops.append(operation(pid, "start_compute", bid, ep["id"]))
    return {"branch": b, "endpoints": eps, "operations": ops}


def restore_branch(pid, bid, body):
    b = branch(pid, bid)
    source = branch(pid, body.get("source_branch_id") or "")
    if source is b:
        raise ApiError(400, "a branch cannot be restored onto itself in this fake", "BAD_REQUEST")
    if children(bid):
        raise ApiError(400, f"branch {bid} has children and cannot be restored", "BRANCH_HAS_CHILDREN")
    lsn = check_lsn(source, body.get("source_lsn"))
    port = b["cluster"].port
    b["cluster"].stop()
    shutil.rmtree(b["cluster"].data)
    cluster = source["cluster"].copy_to(b["cluster"].data)
    cluster.port = port
    if any(e["branch_id"] == bid for e in ENDPOINTS.values()):
        cluster.start()
    b["cluster"] = cluster
    b["json"].update(parent_id=source["json"]["id"], parent_lsn=lsn, parent_timestamp=now(),
                     last_reset_at=now(), updated_at=now())
    DATABASES[bid] = [dict(d, branch_id=bid) for d in DATABASES[source["json"]["id"]]]
    return {"branch": b["json"], "operations": [operation(pid, "restore_branch", bid)]}


def delete_branch(pid, bid):
    b = branch(pid, bid)
    if b["json"].get("default"):
        raise ApiError(400, "the default branch cannot be deleted", "BAD_REQUEST")
    if b["json"].get("protected"):
        raise ApiError(400, f"branch {bid} is protected", "BRANCH_PROTECTED")
    if children(bid):
        raise ApiError(400, f"branch {bid} has children and cannot be deleted", "BRANCH_HAS_CHILDREN")
    b["cluster"].stop()
    shutil.rmtree(b["cluster"].data, ignore_errors=True)
    for eid in [e for e, ep in ENDPOINTS.items() if ep["branch_id"] == bid]:
        del ENDPOINTS[eid]
    del BRANCHES[bid]
    return {"branch": b["json"], "operations": [operation(pid, "delete_timeline", bid)]}


def create_database(pid, bid, body):
    b = branch(pid, bid)
    spec = body.get("database") or {}
    name, owner = spec.get("name"), spec.get("owner_name")
    if not name or not re.fullmatch(r"[A-Za-z0-9_]+", name) or (pid, owner) not in ROLES:
        raise ApiError(400, "database needs a plain name and a known owner_name", "BAD_REQUEST")
    with b["cluster"].admin() as c:
        c.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
    d = {"id": len(DATABASES[bid]) + 1, "branch_id": bid, "name": name, "owner_name": owner}
    DATABASES[bid].append(d)
    return {"database": d, "operations": [operation(pid, "apply_config", bid)]}


def route(method, path, query, body):
    m = re.fullmatch(r"/api/v2/projects", path)
    if m and method == "POST":
        return create_project(body)
    m = re.fullmatch(r"/api/v2/projects/([^/]+)(/.*)?", path)
    if not m:
        raise ApiError(404, f"no route {method} {path}", "NOT_FOUND")
    pid, rest = m.group(1), m.group(2) or ""
    p = project(pid)
    if rest == "" and method == "GET":
        return {"project": p}
    if rest == "/branches" and method == "GET":
        return {"branches": [b["json"] for b in project_branches(pid)]}
    if rest == "/branches" and method == "POST":
        return create_branch(pid, body)
    m = re.fullmatch(r"/branches/([^/]+)(/.*)?", rest)
    if m:
        bid, sub = m.group(1), m.group(2) or ""
        if sub == "" and method == "GET":
            return {"branch": branch(pid, bid)["json"]}
        if sub == "" and method == "PATCH":
            b = branch(pid, bid)
            name = (body.get("branch") or {}).get("name")
            if name:
                check_name_free(pid, name, but=bid)
                b["json"].update(name=name, updated_at=now())
            return {"branch": b["json"], "operations": []}
        if sub == "" and method == "DELETE":
            return delete_branch(pid, bid)
        if sub == "/restore" and method == "POST":
            return restore_branch(pid, bid, body)
        if sub == "/databases" and method == "GET":
            branch(pid, bid)
            return {"databases": DATABASES[bid]}
        if sub == "/databases" and method == "POST":
            return create_database(pid, bid, body)
        if sub == "/endpoints" and method == "GET":
            return {"endpoints": [e for e in ENDPOINTS.values() if e["branch_id"] == bid]}
    if rest == "/endpoints" and method == "GET":
        return {"endpoints": [e for e in ENDPOINTS.values() if e["project_id"] == pid]}
    if rest == "/endpoints" and method == "POST":
        spec = body.get("endpoint") or {}
        ep = new_endpoint(pid, spec.get("branch_id", ""), spec.get("type", "read_write"))
        return {"endpoint": ep, "operations": [operation(pid, "start_compute", ep["branch_id"], ep["id"])]}
    if rest == "/connection_uri" and method == "GET":
        q = {k: v[0] for k, v in query.items()}
        eid = q.get("endpoint_id")
        if eid:
            ep = ENDPOINTS.get(eid)
        else:
            bid = q.get("branch_id") or next(
                b["json"]["id"] for b in project_branches(pid) if b["json"].get("default")
            )
            ep = next((e for e in ENDPOINTS.values() if e["branch_id"] == bid and e["type"] == "read_write"), None)
        if ep is None or ep["project_id"] != pid:
            raise ApiError(404, "endpoint not found", "NOT_FOUND")
        if q.get("branch_id") and q["branch_id"] != ep["branch_id"]:
            raise ApiError(400, "the endpoint is not on that branch", "BAD_REQUEST")
        if not q.get("database_name") or not q.get("role_name"):
            raise ApiError(400, "database_name and role_name are required", "BAD_REQUEST")
        BRANCHES[ep["branch_id"]]["cluster"].start()
        return {"uri": uri(pid, ep, q["database_name"], q["role_name"])}
    m = re.fullmatch(r"/operations/([^/]+)", rest)
    if m and method == "GET":
        op = OPERATIONS.get(m.group(1))
        if op is None or op["project_id"] != pid:
            raise ApiError(404, "operation not found", "NOT_FOUND")
        reply = dict(op)
        op.update(status="finished", updated_at=now())
        return {"operation": reply}
    raise ApiError(404, f"no route {method} {path}", "NOT_FOUND")


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        """The request body, `content-length` or chunked."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status, value):
        data = json.dumps(value).encode()
        assert API_KEY.encode() not in data
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        raw = self.body()
        if self.headers.get("authorization") != f"Bearer {API_KEY}":
            return self.reply(401, {"code": "", "message": "authorization failed"})
        url = urllib.parse.urlsplit(self.path)
        try:
            body = json.loads(raw) if raw else {}
            with LOCK:
                value = route(self.command, url.path, urllib.parse.parse_qs(url.query), body)
            status = 201 if self.command == "POST" and "operations" in value else 200
            self.reply(status, value)
        except ApiError as e:
            self.reply(e.status, {"code": e.code, "message": e.message})
        except Exception as e:  # a bug in the fake: say so
            self.reply(500, {"code": "INTERNAL", "message": f"fake: {type(e).__name__}: {e}"})

    do_GET = do_POST = do_PATCH = do_DELETE = handle_any


def shutdown(*_):
    with LOCK:
        for b in list(BRANCHES.values()):
            try:
                b["cluster"].stop()
            except Exception:
                pass
        shutil.rmtree(BASE, ignore_errors=True)
    os._exit(0)


def main():
    init_template()
    api = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    print(f"listening http://127.0.0.1:{api.server_port}/api/v2", flush=True)
    # The test holds our stdin: when it goes (the test ended, however), so do we.
    sys.stdin.read()
    shutdown()


if __name__ == "__main__":
    main()
