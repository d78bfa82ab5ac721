"""A small Iceberg REST catalog for tests: every request is answered by
pyiceberg's own SqlCatalog (SQLite), so the metadata it serves and writes is
pyiceberg's, and each commit is SqlCatalog.commit_table (requirements checked
against the current metadata, then the compare-and-swap UPDATE).

    python iceberg_rest_server.py DB_PATH WAREHOUSE_URI [TOKEN [CREDENTIAL]]

prints `listening http://127.0.0.1:PORT` once it serves. With TOKEN, a
request without `Authorization: Bearer TOKEN` is answered 401. With
CREDENTIAL (`id:secret`), `POST /v1/oauth/tokens` issues TOKEN for it (OAuth2
client_credentials, as the REST spec's token endpoint does) and answers any
other credential 401; every issue is appended to DB_PATH + ".tokens.log"
(the client id and scope, never the secret) so a test can see who asked.
"""

import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from pydantic import ValidationError
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest

DB, WAREHOUSE = sys.argv[1], sys.argv[2]
TOKEN = sys.argv[3] if len(sys.argv) > 3 else None
CREDENTIAL = sys.argv[4] if len(sys.argv) > 4 else None
TOKENS_LOG = DB + ".tokens.log"
CATALOG = SqlCatalog("default", uri=f"sqlite:///{DB}", warehouse=WAREHOUSE)



class Status(Exception):
    def __init__(self, code, kind, message):
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


def namespace_of(segment):
    return tuple(unquote(segment).split("\x1f"))


def metadata_json(metadata):
    return json.loads(metadata.model_dump_json())


def table_result(table):
    return {
        "metadata-location": table.metadata_location,
        "metadata": metadata_json(table.metadata),
        "config": {},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return json.loads(data or b"{}")
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def reply(self, code, value):
        data = b"" if value is None else json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def issue_token(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        client_id, _, client_secret = CREDENTIAL.partition(":")
        if (form.get("grant_type") != "client_credentials" or form.get("client_id") != client_id
                or form.get("client_secret") != client_secret):
            return 401, {"error": "invalid_client", "error_description": "unknown client"}
        with open(TOKENS_LOG, "a") as f:
            f.write(json.dumps({"client_id": form["client_id"], "scope": form.get("scope")}) + "\n")
        return 200, {"access_token": TOKEN, "token_type": "bearer", "expires_in": 3600,
                     "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}

    def route(self):
        if CREDENTIAL is not None and self.command == "POST" and urlparse(self.path).path == "/v1/oauth/tokens":
            return self.issue_token()
        if TOKEN is not None and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            raise Status(401, "NotAuthorizedException", "a bearer token is required")
        url = urlparse(self.path)
        parts = [p for p in url.path.split("/") if p]
        method = self.command
        if parts == ["v1", "config"]:
            # No `endpoints`: clients assume the namespace and table routes,
            # which are what this server has.
            return 200, {"defaults": {}, "overrides": {}}
        if parts[:2] != ["v1", "namespaces"]:
            raise Status(404, "NotFound", f"no route {method} {url.path}")
        rest = parts[2:]
        if not rest:
            if method == "GET":
                parent = parse_qs(url.query).get("parent", [None])[0]
                names = CATALOG.list_namespaces(namespace_of(parent) if parent else ())
                return 200, {"namespaces": [list(n) for n in names]}
            body = self.body()
            CATALOG.create_namespace(tuple(body["namespace"]), body.get("properties", {}))
            return 200, {"namespace": body["namespace"], "properties": body.get("properties", {})}
        ns = namespace_of(rest[0])
        if len(rest) == 1:
            return 200, {"namespace": list(ns), "properties": CATALOG.load_namespace_properties(ns)}
        if rest[1] != "tables":
            raise Status(404, "NotFound", f"no route {method} {url.path}")
        if len(rest) == 2:
            if method == "GET":
                tables = CATALOG.list_tables(ns)
                return 200, {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in tables]}
            body = self.body()
            table = CATALOG.create_table(
                ns + (body["name"],),
                schema=Schema.model_validate(body["schema"]),
                location=body.get("location"),
                properties=body.get("properties", {}),
            )
            return 200, table_result(table)
        identifier = ns + (unquote(rest[2]),)
        table = CATALOG.load_table(identifier)
        if method in ("GET", "HEAD"):
            return 200, table_result(table)
        request = CommitTableRequest.model_validate(self.body())
        response = CATALOG.commit_table(table, request.requirements, request.updates)
        return 200, {
            "metadata-location": response.metadata_location,
            "metadata": metadata_json(response.metadata),
        }

    def handle_any(self):
        try:
            code, value = self.route()
        except Status as e:
            code, value = e.code, {"error": {"message": e.message, "type": e.kind, "code": e.code}}
        except (NoSuchTableError, NoSuchNamespaceError) as e:
            code, value = 404, {"error": {"message": str(e), "type": type(e).__name__, "code": 404}}
        except (CommitFailedException, TableAlreadyExistsError, NamespaceAlreadyExistsError,
                NamespaceNotEmptyError) as e:
            code, value = 409, {"error": {"message": str(e), "type": type(e).__name__, "code": 409}}
        except (ValidationError, ValueError, KeyError) as e:
            code, value = 400, {"error": {"message": str(e), "type": type(e).__name__, "code": 400}}
        except Exception as e:  # noqa: BLE001 - the client sees a 500, the test log the trace
            traceback.print_exc()
            code, value = 500, {"error": {"message": str(e), "type": type(e).__name__, "code": 500}}
        self.reply(code, value)

    do_GET = do_POST = do_HEAD = do_DELETE = handle_any


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
