#!/usr/bin/env python3
"""A third-party MCP server that runs behind its own authorization server (nanoidp).

    notes_server.py --port 8095 --issuer https://127.0.0.1:9000 --ca-cert ca.pem --calls-log calls.jsonl

Written with the official MCP Python SDK (Streamable HTTP, both protocol revisions
the SDK speaks) and protected as the MCP authorization spec says:

- RFC 9728 metadata at /.well-known/oauth-protected-resource/mcp (and the root form);
- every request to /mcp without a valid token: 401 and
  `WWW-Authenticate: Bearer resource_metadata="...", scope="notes:read"` - the tools
  are hidden until the person signs in;
- a valid token must be a nanoidp access token (JWKS signature, iss, exp) whose `aud`
  is this server's URL (RFC 8707), with `notes:read`;
- a tools/call of add_note without `notes:write`: 403 with
  `error="insufficient_scope", scope="notes:read notes:write"` (step-up), decided at
  the HTTP layer by peeking at the JSON-RPC body, so the client sees a real 403.

Each tools/call with a valid token appends one JSON line to --calls-log. Notes are
kept in memory, per token subject. GET /healthz needs no token.
"""

from __future__ import annotations

import argparse
import datetime
import json
import ssl
import threading
import time
import urllib.request
from typing import Annotated, Any

import anyio
import jwt
import uvicorn
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

READ, WRITE = "notes:read", "notes:write"
# Which scope each tool needs beyond READ (which every request needs).
TOOL_SCOPES = {"add_note": [READ, WRITE]}


class TokenRejected(Exception):
    pass


class Verifier:
    """Verifies nanoidp's JWT access tokens locally, with the keys from its JWKS."""

    def __init__(self, issuer: str, audience: str, ca_cert: str | None, max_age: int) -> None:
        self.issuer, self.audience, self.max_age = issuer, audience, max_age
        self.ssl = ssl.create_default_context(cafile=ca_cert) if ca_cert else None
        self._jwks: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()
        self.verified: dict[str, dict] = {}  # token -> claims, for the tools to read

    def _keys(self) -> jwt.PyJWKClient:
        # Found through the issuer's metadata (RFC 8414), fetched on first use because
        # nanoidp may start after this server.
        with self._lock:
            if self._jwks is None:
                url = f"{self.issuer}/.well-known/oauth-authorization-server"
                with urllib.request.urlopen(url, context=self.ssl, timeout=10) as response:
                    jwks_uri = json.load(response)["jwks_uri"]
                self._jwks = jwt.PyJWKClient(jwks_uri, ssl_context=self.ssl, lifespan=300)
            return self._jwks

    def _verify(self, token: str) -> dict:
        try:
            key = self._keys().get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self.audience, issuer=self.issuer,
                options={"require": ["exp", "iat", "iss", "sub", "aud"]},
            )
        except (jwt.PyJWTError, OSError, KeyError, ValueError) as error:
            raise TokenRejected(f"the access token is not valid here: {error}") from error
        if claims.get("token_use") != "access":
            raise TokenRejected("not an access token")
        # nanoidp's exp is in whole minutes; the lab's shorter lifetime is this server's.
        if self.max_age and time.time() >= claims["iat"] + self.max_age:
            raise TokenRejected("the access token expired")
        return claims

    async def verify(self, token: str) -> dict:
        claims = await anyio.to_thread.run_sync(self._verify, token)
        if len(self.verified) > 10_000:
            self.verified.clear()
        self.verified[token] = claims
        return claims


def scopes_of(claims: dict) -> list[str]:
    return (claims.get("scope") or "").split()


def challenge(status: int, params: dict[str, str], description: str | None = None) -> Response:
    header = "Bearer " + ", ".join(f'{k}="{v}"' for k, v in params.items())
    body = {"error": params.get("error", "invalid_token"), "error_description": description or "sign-in required"}
    return JSONResponse(body, status_code=status, headers={"WWW-Authenticate": header})


class AuthGate:
    """ASGI middleware in front of the SDK's app: every request to the MCP endpoint
    needs a token, and a tools/call needs the scopes of the tool it calls."""

    def __init__(self, app, verifier: Verifier, path: str, metadata_url: str, calls_log: str) -> None:
        self.app, self.verifier, self.path = app, verifier, path
        self.metadata_url, self.calls_log = metadata_url, calls_log
        self._log_lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            return await self.app(scope, receive, send)

        def refuse(status: int, params: dict[str, str], description: str | None = None):
            params = {**params, "resource_metadata": self.metadata_url}
            return challenge(status, params, description)(scope, receive, send)

        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            # No credentials at all: no error code (RFC 6750 section 3.1).
            return await refuse(401, {"scope": READ})
        token = token.strip()
        try:
            claims = await self.verifier.verify(token)
        except TokenRejected as rejected:
            return await refuse(401, {"error": "invalid_token", "scope": READ}, str(rejected))
        granted = scopes_of(claims)
        if READ not in granted:
            return await refuse(403, {"error": "insufficient_scope", "scope": READ}, f"{READ} is required")

        body = b""
        if scope["method"] == "POST":
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            for tool in called_tools(body):
                needed = TOOL_SCOPES.get(tool, [READ])
                allowed = all(s in granted for s in needed)
                self.log_call(claims, tool, "accepted" if allowed else "insufficient_scope")
                if not allowed:
                    return await refuse(403, {"error": "insufficient_scope", "scope": " ".join(needed)},
                                        f"{tool} needs {' '.join(needed)}")

        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        # The SDK binds a session to the principal (client_id, iss, sub) that opened it.
        scope["user"] = AuthenticatedUser(AccessToken(
            token=token, client_id=str(claims.get("client_id") or ""), scopes=granted,
            expires_at=claims.get("exp"), resource=self.verifier.audience, subject=claims.get("sub"),
            claims={"iss": claims.get("iss")},
        ))
        await self.app(scope, replay if scope["method"] == "POST" else receive, send)

    def log_call(self, claims: dict, tool: str, status: str) -> None:
        line = {
            "subject": claims.get("sub"), "tool": tool,
            # nanoidp names the client in `client_id` (RFC 9068); `azp` if another AS does.
            "client_id": claims.get("client_id") or claims.get("azp"),
            "scopes": scopes_of(claims), "status": status,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        }
        with self._log_lock, open(self.calls_log, "a") as out:
            out.write(json.dumps(line) + "\n")


def called_tools(body: bytes) -> list[str]:
    """The tool names of the tools/call requests in a JSON-RPC body (one or a batch)."""
    try:
        parsed: Any = json.loads(body or b"null")
    except ValueError:
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [str((m.get("params") or {}).get("name")) for m in messages
            if isinstance(m, dict) and m.get("method") == "tools/call"]


class Note(BaseModel):
    id: int
    text: str
    created_at: str


class Notes(BaseModel):
    notes: list[Note]


class Identity(BaseModel):
    subject: str
    client_id: str | None
    scopes: list[str]


def build(args, verifier: Verifier) -> MCPServer:
    server = MCPServer(args.name, title=args.title, description=args.description,
                       instructions=args.description, version="1.0.0")
    notes: dict[str, list[Note]] = {}

    def claims_of(ctx: Context) -> dict:
        authorization = (ctx.headers or {}).get("authorization", "")
        return verifier.verified.get(authorization.partition(" ")[2].strip(), {})

    @server.tool(title="Who am I", annotations=ToolAnnotations(read_only_hint=True),
                 description="Who this server knows you as: the signed-in account and the scopes granted.")
    def whoami(ctx: Context) -> Identity:
        claims = claims_of(ctx)
        return Identity(subject=claims.get("sub", ""), client_id=claims.get("client_id"), scopes=scopes_of(claims))

    @server.tool(title="List my notes", annotations=ToolAnnotations(read_only_hint=True),
                 description="The notes of the signed-in account, oldest first.")
    def list_notes(ctx: Context) -> Notes:
        return Notes(notes=notes.get(claims_of(ctx).get("sub", ""), []))

    @server.tool(title="Add a note", annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
                 description="Add a note to the signed-in account's notes. Needs the notes:write scope.")
    def add_note(text: Annotated[str, Field(description="The note's text.", min_length=1)], ctx: Context) -> Note:
        mine = notes.setdefault(claims_of(ctx).get("sub", ""), [])
        note = Note(id=len(mine) + 1, text=text,
                    created_at=datetime.datetime.now(datetime.timezone.utc).isoformat())
        mine.append(note)
        return note

    def metadata(_: Request) -> Response:
        return JSONResponse({
            "resource": verifier.audience,
            "authorization_servers": [args.issuer],
            "scopes_supported": [READ, WRITE],
            "bearer_methods_supported": ["header"],
            "resource_name": args.title,
        })

    async def metadata_route(request: Request) -> Response:
        return metadata(request)

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    server.custom_route("/.well-known/oauth-protected-resource/mcp", ["GET"])(metadata_route)
    server.custom_route("/.well-known/oauth-protected-resource", ["GET"])(metadata_route)
    server.custom_route("/healthz", ["GET"])(healthz)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8095)
    parser.add_argument("--issuer", required=True, help="nanoidp's issuer URL")
    parser.add_argument("--ca-cert", help="CA that signed the issuer's certificate")
    parser.add_argument("--calls-log", required=True, help="one JSON line per tools/call goes here")
    parser.add_argument("--max-token-age", type=int, default=0,
                        help="refuse access tokens older than this many seconds (0: only exp)")
    parser.add_argument("--name", default="notes")
    parser.add_argument("--title", default="Notes")
    parser.add_argument("--description", default="Personal notes. This server's tools are hidden until you sign in to it.")
    args = parser.parse_args()

    origin = f"http://{args.host}:{args.port}"
    verifier = Verifier(args.issuer, f"{origin}/mcp", args.ca_cert, args.max_token_age)
    app = build(args, verifier).streamable_http_app(host=args.host)
    gate = AuthGate(app, verifier, "/mcp", f"{origin}/.well-known/oauth-protected-resource/mcp", args.calls_log)
    uvicorn.run(gate, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
