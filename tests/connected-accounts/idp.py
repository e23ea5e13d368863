#!/usr/bin/env python3
"""nanoidp, served in this process with one lab-only admin call added beside it.

    idp.py --config DIR --port 9000 [--cert server.pem --key server-key.pem]

Everything OAuth is nanoidp's own (its Flask app, unchanged). What this adds is
`POST /_lab/revoke` (form: user, optional client_id): nanoidp has no "revoke every
refresh token of this user" call, and RFC 7009 revocation needs the token itself,
which only the gateway holds. So this wrapper notes the `jti` of each refresh token
nanoidp hands out at /token (the claims only, never the token), and the admin call
marks those `jti`s revoked in nanoidp's own revocation store. The next refresh with
any of them is refused by nanoidp's refresh grant (invalid_grant), which also revokes
the whole rotation family, exactly as it does for a replayed refresh token.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import threading
import urllib.parse

from nanoidp.app import create_app
from nanoidp.services import get_revocation_store
from werkzeug.serving import run_simple

log = logging.getLogger("lab.idp")


def jwt_claims(token: str) -> dict:
    """The payload of a JWT nanoidp itself just signed (so no verification here)."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class RefreshLedger:
    """Which refresh tokens (by jti) nanoidp issued to which user and client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: list[dict] = []

    def note(self, token: str) -> None:
        claims = jwt_claims(token)
        with self._lock:
            self._issued.append({key: claims.get(key) for key in ("sub", "client_id", "jti", "rt_family", "exp")})

    def revoke(self, user: str, client_id: str | None) -> int:
        with self._lock:
            chosen = [t for t in self._issued
                      if t["sub"] == user and (client_id is None or t["client_id"] == client_id)]
        store = get_revocation_store()
        for token in chosen:
            store.revoke(token["jti"], expires_at=token["exp"])
        log.info("revoked %d refresh token(s) of %s (families %s)", len(chosen), user,
                 sorted({t["rt_family"] for t in chosen}))
        return len(chosen)


def with_lab_admin(app, ledger: RefreshLedger):
    """WSGI middleware: note refresh tokens leaving /token, serve /_lab/revoke."""

    def wsgi(environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == "/_lab/revoke" and method == "POST":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            form = urllib.parse.parse_qs(environ["wsgi.input"].read(size).decode())
            user = (form.get("user") or [""])[0]
            if not user:
                start_response("400 Bad Request", [("Content-Type", "application/json")])
                return [b'{"error":"user is required"}']
            revoked = ledger.revoke(user, (form.get("client_id") or [None])[0])
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"revoked": revoked}).encode()]
        if path != "/token" or method != "POST":
            return app(environ, start_response)

        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda _data: None  # nanoidp never uses write()

        result = app(environ, capture)
        try:
            body = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        if captured["status"].startswith("200"):
            try:
                token = json.loads(body).get("refresh_token")
                if token:
                    ledger.note(token)
            except (ValueError, IndexError):
                log.warning("could not read a /token response")
        start_response(captured["status"], captured["headers"])
        return [body]

    return wsgi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="nanoidp's configuration directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", help="serve https with this certificate")
    parser.add_argument("--key", help="and this key")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    app = with_lab_admin(create_app(args.config), RefreshLedger())
    ssl_context = (args.cert, args.key) if args.cert else None
    run_simple(args.host, args.port, app, threaded=True, ssl_context=ssl_context)


if __name__ == "__main__":
    main()
