"""The tests' stand-in for `dolt sql-server`: the MySQL wire protocol
(mysql-mimic) in front of DoltHub's embedded engine (doltlite).

    dolt_server.py USER PASSWORD DIR [DATABASE ...]

Listens on a free 127.0.0.1 port, prints `listening <port>` on its first
line, and serves each database NAME from the doltlite file DIR/NAME.db, as
`dolt sql-server` serves a directory of databases; `CREATE DATABASE NAME`
makes one, as does naming it after DIR. Clients log in as USER with PASSWORD (mysql_native_password; an
empty PASSWORD lets USER in without one).
Every MySQL connection gets its own doltlite connection, so each session has
its own checked-out branch, as in Dolt. No dolt binary can be built on this
machine; doltlite gives branches, tags, merges and conflicts Dolt's
semantics, and the client's SQL goes over the real MySQL protocol.

Statements pass to doltlite unchanged except for what must be translated
(TRANSLATIONS below, also listed in docs/guide/backends/dolt.md):

- `SET ...` (what sqlx sends on connect: sql_mode, time_zone, NAMES; the
  host's max_execution_time) is accepted and ignored;
- `START TRANSACTION [READ ONLY]`, `BEGIN`, `COMMIT`, `ROLLBACK` run as
  SQLite's `BEGIN` / `COMMIT` / `ROLLBACK`;
- `CALL DOLT_X(args)` runs as `SELECT dolt_x(args)`, and its result is the
  row Dolt's procedure returns (`status`, `hash`, or for DOLT_MERGE `hash,
  fast_forward, conflicts, message`);
- `DOLT_MERGE('--ff-only', ...)`, which doltlite lacks, is checked with
  `dolt_merge_base` first and refused as Dolt refuses it;
- a merge that conflicts inside a transaction: doltlite raises, Dolt returns
  a row with `conflicts = 1` and leaves the transaction open; the stand-in
  returns Dolt's row;
- `CREATE DATABASE [IF NOT EXISTS] name` makes DIR/name.db (doltlite gives
  it its first commit on `main`, as Dolt does);
- revision databases: `USE `db/branch`` (or connecting to `db/branch`)
  checks the branch out in the session (`dolt_checkout`); `db` alone is the
  default branch `main`.

One fix to the wire protocol itself: mysql-mimic sends an EOF packet after a
prepared statement's parameter definitions even to a client that set
CLIENT_DEPRECATE_EOF (sqlx does); the stand-in sends none then, as MySQL and
Dolt do (`_stmt_prepare_response`).

What the stand-in cannot answer as `dolt sql-server` would (UNSUPPORTED):

- revision databases at a tag or a commit hash (`db/v1`, `db/<hash>`,
  read-only in Dolt): refused;
- `AS OF` queries: not translated (doltlite has `dolt_at_<table>(ref)`);
- affected-row counts: every statement reports 0 rows changed;
- users, grants and privileges: one user, all databases;
- Dolt's system variables (`@@<db>_head` and friends) and `SHOW`
  statements: not served.
"""

import asyncio
import pathlib
import re
import sys

import doltlite  # noqa: F401  (swaps sqlite3's engine for libdoltlite)
import sqlite3

from mysql_mimic import MysqlServer, User, packets
from mysql_mimic.connection import Connection
from mysql_mimic.auth import IdentityProvider, NativePasswordAuthPlugin
from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.session import BaseSession
from mysql_mimic.variables import GlobalVariables, SessionVariables

CALL = re.compile(r"^\s*CALL\s+(DOLT_[A-Z_]+)\s*\((.*)\)\s*;?\s*$", re.I | re.S)
USE = re.compile(r"^\s*USE\s+`?([^`;\s]+)`?\s*;?\s*$", re.I)
FIRST = re.compile(r"^\s*([A-Za-z]+)")
CREATE_DB = re.compile(r"^\s*CREATE\s+DATABASE\s+(IF\s+NOT\s+EXISTS\s+)?`?(\w+)`?\s*;?\s*$", re.I)
CONFLICT = re.compile(r"Merge has (\d+) conflict", re.I)
# The first argument of a procedure call, when it is a quoted option.
ARGS = re.compile(r"'((?:[^'\\]|\\.|'')*)'|(\d+)")

# MySQL's ER_BAD_DB_ERROR and ER_DB_CREATE_EXISTS (mysql-mimic names neither).
BAD_DB_ERROR = 1049
DB_CREATE_EXISTS = 1007

# What each procedure returns in Dolt (one row).
RESULT_COLUMNS = {
    "DOLT_COMMIT": ["hash"],
    "DOLT_MERGE": ["hash", "fast_forward", "conflicts", "message"],
}


def _stmt_prepare_response(self, statement):
    """mysql-mimic 3.0.5 ends a prepared statement's parameter definitions
    with an EOF packet even when the client set CLIENT_DEPRECATE_EOF, as
    sqlx does; the MySQL protocol (and `dolt sql-server`) sends none then,
    and sqlx reads the stray packet as the next result. Sent as MySQL does."""
    yield packets.make_com_stmt_prepare_ok(statement)
    if statement.num_params:
        for _ in range(statement.num_params):
            yield packets.make_column_definition_41(server_charset=self.server_charset, name="?")
        if not self.deprecate_eof():
            yield self.eof()


Connection.com_stmt_prepare_response = _stmt_prepare_response


def fail(message, code=ErrorCode.UNKNOWN_ERROR):
    raise MysqlError(message, code=code)


def quoted_args(text):
    """The string and number arguments of a call, in order."""
    out = []
    for m in ARGS.finditer(text):
        if m.group(1) is not None:
            out.append(m.group(1).replace("''", "'").replace("\\'", "'"))
        else:
            out.append(m.group(2))
    return out


class Identity(IdentityProvider):
    def __init__(self, user, password):
        self.user = user
        self.auth = NativePasswordAuthPlugin.create_auth_string(password) if password else None

    def get_plugins(self):
        return [NativePasswordAuthPlugin()]

    async def get_user(self, username):
        if username != self.user:
            return None
        return User(name=username, auth_string=self.auth, auth_plugin=NativePasswordAuthPlugin.name)


class DoltSession(BaseSession):
    """One MySQL session: one doltlite connection to the database it uses."""

    def __init__(self, root):
        self.variables = SessionVariables(GlobalVariables())
        self.username = None
        self.database = None
        self.root = root
        self.conn = None
        self.conn_name = None

    async def init(self, connection):
        if self.database:
            await self.use(self.database)

    async def close(self):
        if self.conn is not None:
            conn, self.conn = self.conn, None
            await asyncio.to_thread(conn.close)

    async def reset(self):
        pass

    async def use(self, database):
        name, _, rev = database.partition("/")
        path = self._path(name)
        if not path.is_file():
            fail(f"database not found: {database}", BAD_DB_ERROR)
        if self.conn_name != name:
            await self.close()
            self.conn = await asyncio.to_thread(self._open, path)
            self.conn_name = name
        branch = rev or "main"
        branches = [r[0] for r in await self._run("SELECT name FROM dolt_branches")]
        if branch not in branches:
            fail(
                f"the stand-in serves revision databases for branches only; {database!r} "
                "names no branch (Dolt would open a tag or commit read-only)",
                BAD_DB_ERROR,
            )
        await self._run("SELECT dolt_checkout(?)", (branch,))
        self.database = database

    def _path(self, name):
        if not re.fullmatch(r"\w+", name):
            fail(f"database not found: {name}", BAD_DB_ERROR)
        return self.root / f"{name}.db"

    async def _create(self, name, if_not_exists):
        path = self._path(name)
        if path.exists():
            if if_not_exists:
                return None
            fail(f"can't create database {name}; database exists", DB_CREATE_EXISTS)
        await asyncio.to_thread(lambda: self._open(path).close())
        return None

    @staticmethod
    def _open(path):
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
        return conn

    async def _run(self, sql, params=()):
        if self.conn is None:
            fail("no database selected", ErrorCode.NO_DB_ERROR)

        def run():
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall()
            names = [d[0] for d in (cur.description or [])]
            return rows, names

        try:
            rows, names = await asyncio.to_thread(run)
        except sqlite3.Error as e:
            fail(str(e))
        self._last_columns = names
        return rows

    async def handle_query(self, sql, attrs):
        first = (FIRST.match(sql) or [None, ""])[1].upper()
        if first == "SET":
            return None
        if first in ("BEGIN", "START"):
            await self._run("BEGIN")
            return None
        if first in ("COMMIT", "ROLLBACK"):
            if self.conn is not None and self.conn.in_transaction:
                await self._run(first)
            return None
        m = CREATE_DB.match(sql)
        if m:
            return await self._create(m.group(2), bool(m.group(1)))
        m = USE.match(sql)
        if m:
            await self.use(m.group(1))
            return None
        m = CALL.match(sql)
        if m:
            return await self._call(m.group(1).upper(), m.group(2))
        rows = await self._run(sql)
        if not self._last_columns:
            return None
        return rows, self._last_columns

    async def _call(self, proc, args):
        values = quoted_args(args)
        if proc == "DOLT_MERGE":
            return await self._merge(args, values)
        rows = await self._run(f"SELECT {proc.lower()}({args})")
        value = rows[0][0] if rows else None
        columns = RESULT_COLUMNS.get(proc, ["status"])
        return [(value,)], columns

    async def _merge(self, args, values):
        columns = RESULT_COLUMNS["DOLT_MERGE"]
        if "--ff-only" in values:
            source = [v for v in values if not v.startswith("-")][0]
            head = (await self._run("SELECT dolt_hashof('HEAD')"))[0][0]
            base = (await self._run("SELECT dolt_merge_base('HEAD', ?)", (source,)))[0][0]
            if base != head:
                fail("fatal: Not possible to fast-forward, aborting.")
            args = ", ".join("'" + v.replace("'", "''") + "'" for v in values if v != "--ff-only")
        before = (await self._run("SELECT dolt_hashof('HEAD')"))[0][0]
        try:
            rows = await self._run(f"SELECT dolt_merge({args})")
        except MysqlError as e:
            m = CONFLICT.search(str(e))
            if m and self.conn.in_transaction:
                return [("", 0, int(m.group(1)) and 1, "conflicts found")], columns
            raise
        message = str(rows[0][0]) if rows else ""
        after = (await self._run("SELECT dolt_hashof('HEAD')"))[0][0]
        parents = await self._run(
            "SELECT count(*) FROM dolt_commit_ancestors WHERE commit_hash = ?", (after,)
        )
        fast_forward = int(after != before and parents[0][0] < 2)
        return [(after, fast_forward, 0, message)], columns


async def main():
    user, password, root = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    root.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[4:]:
        sqlite3.connect(root / f"{name}.db").close()
    server = MysqlServer(
        session_factory=lambda: DoltSession(root),
        identity_provider=Identity(user, password),
    )
    await server.start_server(host="127.0.0.1", port=0)
    port = server.sockets()[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
