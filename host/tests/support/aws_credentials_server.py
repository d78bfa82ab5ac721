"""Loopback stand-ins for the two AWS credential endpoints that are not
moto's: the ECS container credentials endpoint and the IAM Identity Center
(SSO) portal's GetRoleCredentials, both handing out the same keys.

Usage: aws_credentials_server.py KEY_ID SECRET ECS_TOKEN SSO_ACCESS_TOKEN
Serves http://127.0.0.1:PORT; prints `listening http://127.0.0.1:PORT` once
ready, then one line per request it answered with keys (`ecs` or `sso`).

- GET /ecs with `Authorization: ECS_TOKEN` (AWS_CONTAINER_AUTHORIZATION_TOKEN)
  gives the container credentials JSON (whose `Token` the SDK requires);
  anything else 401.
- GET /federation/credentials?role_name=..&account_id=.. with
  `x-amz-sso_bearer_token: SSO_ACCESS_TOKEN` gives `roleCredentials`
  (without a session token: moto, with its authentication on, checks a
  token it did not issue and refuses it).
"""

import http.server
import json
import sys
import time
import urllib.parse

KEY_ID, SECRET, ECS_TOKEN, SSO_TOKEN = sys.argv[1:5]
EXPIRES = time.time() + 3600


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/ecs":
            if self.headers.get("Authorization") != ECS_TOKEN:
                return self.reply(401, {"message": "bad token"})
            print("ecs", flush=True)
            return self.reply(200, {
                "AccessKeyId": KEY_ID,
                "SecretAccessKey": SECRET,
                "Token": "container-session",
                "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EXPIRES)),
            })
        if url.path == "/federation/credentials":
            query = urllib.parse.parse_qs(url.query)
            if (self.headers.get("x-amz-sso_bearer_token") != SSO_TOKEN
                    or query.get("role_name") != ["lab"]
                    or query.get("account_id") != ["123456789012"]):
                return self.reply(401, {"message": "bad token or role"})
            print("sso", flush=True)
            return self.reply(200, {"roleCredentials": {
                "accessKeyId": KEY_ID,
                "secretAccessKey": SECRET,
                "expiration": int(EXPIRES * 1000),
            }})
        self.reply(404, {"message": "not found"})


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
