#!/usr/bin/env python3
"""Proves a running connected-accounts lab works, without the gateway and without a
browser: the whole sign-in a gateway does, done by hand against the real parts.

    smoke.py --state-dir DIR     # DIR/ready.json written by `lab.py run`

Registers a client (RFC 7591), signs alice in by posting nanoidp's login form
(authorization code + PKCE S256, `resource`), checks `iss` in the redirect (RFC 9207),
calls the notes MCP server with the official Python SDK on both protocol revisions,
checks the 401 and 403 (step-up) challenges, refreshes (rotation and reuse
detection), revokes (RFC 7009 and the lab's per-user revoke), introspects, counts
through `lab.py count`, and with --cimd on signs in a client known only by its
client ID metadata document, which this script serves itself over http.
Prints one PASS/FAIL line per check; exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

HERE = Path(__file__).resolve().parent
CALLBACK = "http://127.0.0.1:9/callback"  # never visited: the redirect is read, not followed
REVISIONS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
failures: list[str] = []


def check(what: str, ok: bool, detail: object = "") -> bool:
    print(f"{'PASS' if ok else 'FAIL'} {what}{'' if ok or detail == '' else f': {detail}'}", flush=True)
    if not ok:
        failures.append(what)
    return ok


def claims(jwt: str) -> dict:
    part = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def www_authenticate(response: httpx2.Response) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', response.headers.get("www-authenticate", "")))


class Lab:
    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.info = json.loads((Path(state_dir) / "ready.json").read_text())
        self.issuer = self.info["issuer"]
        self.http = httpx2.Client(verify=self.info["ca_cert"], timeout=15)

    def count(self, *args: str) -> int:
        out = subprocess.run([sys.executable, str(HERE / "lab.py"), "count", "--state-dir", self.state_dir, *args],
                             check=True, capture_output=True, text=True).stdout
        return int(out.strip())

    def revoke_user(self, user: str, client: str) -> int:
        out = subprocess.run([sys.executable, str(HERE / "lab.py"), "revoke", "--state-dir", self.state_dir,
                              "--user", user, "--client", client], check=True, capture_output=True, text=True).stdout
        return int(out.strip())

    def authorize(self, client_id: str, user: str, scope: str, *, password: str | None = None,
                  pkce: bool = True) -> tuple[httpx2.Response, dict]:
        """Starts a sign-in as a browser would and posts the login form. Returns the
        last response and what the flow needs later (state, verifier)."""
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(16)
        query = {"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK, "scope": scope,
                 "state": state, "resource": self.info["mcp_url"]}
        if pkce:
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            query |= {"code_challenge": challenge, "code_challenge_method": "S256"}
        url = f"{self.info['authorization_endpoint']}?{urllib.parse.urlencode(query)}"
        browser = httpx2.Client(verify=self.info["ca_cert"], timeout=15)  # its own cookie jar
        page = browser.get(url)
        if page.status_code != 200:
            return page, {"state": state, "verifier": verifier}
        found = re.search(r'name="transaction_id" value="([^"]+)"', page.text)
        form = {"transaction_id": html.unescape(found.group(1)) if found else "",
                "username": user, "password": password if password is not None else self.info["users"][user]}
        # The login form has no action: it posts back to the URL of the page.
        return browser.post(url, data=form), {"state": state, "verifier": verifier}

    def sign_in(self, client_id: str, user: str, scope: str, secret: str | None = None) -> dict:
        """A complete sign-in: the code from the redirect, exchanged with `resource`."""
        response, flow = self.authorize(client_id, user, scope)
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(response.headers.get("location", "")).query))
        if "code" not in params:
            raise RuntimeError(f"no code: {response.status_code} {response.headers.get('location')} {response.text[:300]}")
        return {**self.token(client_id, secret, grant_type="authorization_code", code=params["code"],
                             redirect_uri=CALLBACK, code_verifier=flow["verifier"],
                             resource=self.info["mcp_url"]).json(), "_redirect": params, "_state": flow["state"]}

    def token(self, client_id: str, secret: str | None, **form: str) -> httpx2.Response:
        return self.post("token_endpoint", client_id, secret, form)

    def post(self, endpoint: str, client_id: str, secret: str | None, form: dict) -> httpx2.Response:
        if secret:
            return self.http.post(self.info[endpoint], data=form, auth=(client_id, secret))
        return self.http.post(self.info[endpoint], data={**form, "client_id": client_id})


async def call_tools(url: str, token: str, mode: str) -> dict:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            who = (await client.call_tool("whoami", {})).structured_content
            added = await client.call_tool("add_note", {"text": f"written over {mode}"})
            listed = (await client.call_tool("list_notes", {})).structured_content
            return {"tools": tools, "whoami": who, "added": added.structured_content, "notes": listed,
                    "version": str(client.protocol_version)}


def raw_tool_call(lab: Lab, token: str, tool: str, arguments: dict) -> httpx2.Response:
    """tools/call over plain HTTP (legacy handshake first), to see the status code."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    url = lab.info["mcp_url"]
    opened = lab.http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "smoke", "version": "1"}}})
    session = opened.headers.get("mcp-session-id")
    headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"} if session else {}
    lab.http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return lab.http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})


def check_discovery(lab: Lab) -> None:
    meta = lab.http.get(f"{lab.issuer}/.well-known/oauth-authorization-server").json()
    check("AS metadata: issuer", meta.get("issuer") == lab.issuer, meta.get("issuer"))
    check("AS metadata: only S256 PKCE", meta.get("code_challenge_methods_supported") == ["S256"],
          meta.get("code_challenge_methods_supported"))
    if lab.issuer.startswith("https://"):
        check("AS metadata: RFC 9207 iss supported", meta.get("authorization_response_iss_parameter_supported") is True)
    check("AS metadata: registration_endpoint iff --dcr on",
          ("registration_endpoint" in meta) == lab.info["dcr"], meta.get("registration_endpoint"))
    check("AS metadata: client_id_metadata_document_supported iff --cimd on",
          bool(meta.get("client_id_metadata_document_supported")) == lab.info["cimd"])

    prm = lab.http.get(lab.info["resource_metadata_url"]).json()
    check("PRM: resource is the MCP URL", prm.get("resource") == lab.info["mcp_url"], prm)
    check("PRM: authorization_servers is nanoidp", prm.get("authorization_servers") == [lab.issuer], prm)
    check("PRM: scopes_supported", prm.get("scopes_supported") == ["notes:read", "notes:write"], prm)
    root = lab.http.get(lab.info["mcp_url"].replace("/mcp", "/.well-known/oauth-protected-resource"))
    check("PRM: root form answers too", root.status_code == 200 and root.json() == prm)

    for method in ("POST", "GET"):
        response = lab.http.request(method, lab.info["mcp_url"], headers={"Accept": "application/json, text/event-stream"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if method == "POST" else None)
        params = www_authenticate(response)
        check(f"MCP {method} without a token: 401 with resource_metadata and scope",
              response.status_code == 401 and params.get("resource_metadata") == lab.info["resource_metadata_url"]
              and params.get("scope") == "notes:read", (response.status_code, response.headers.get("www-authenticate")))


def check_registered_client(lab: Lab) -> None:
    registered = lab.http.post(lab.info["registration_endpoint"], json={
        "client_name": "smoke", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "client_secret_basic",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "scope": "notes:read notes:write"})
    if not check("DCR: registered", registered.status_code == 201, registered.text):
        return
    client_id, secret = registered.json()["client_id"], registered.json()["client_secret"]
    check("DCR: counted as client_registered", lab.count("--event", "client_registered", "--client", client_id) == 1)

    no_pkce, _ = lab.authorize(client_id, "alice", "notes:read", pkce=False)
    location = no_pkce.headers.get("location", "")
    check("PKCE is mandatory", "error=invalid_request" in location, (no_pkce.status_code, location))
    wrong, _ = lab.authorize(client_id, "alice", "notes:read", password="wrong")
    check("a wrong password shows the form again", wrong.status_code == 200 and "Invalid username or password" in wrong.text)

    signed = lab.sign_in(client_id, "alice", "notes:read notes:write", secret)
    redirect = signed["_redirect"]
    check("redirect carries the state", redirect.get("state") == signed["_state"])
    if lab.issuer.startswith("https://"):
        check("redirect carries iss (RFC 9207)", redirect.get("iss") == lab.issuer, redirect)
    access = claims(signed["access_token"])
    check("access token: aud is the MCP URL (RFC 8707)", access.get("aud") == lab.info["mcp_url"], access.get("aud"))
    check("access token: sub, client_id, scope",
          (access.get("sub"), access.get("client_id"), access.get("scope")) == ("alice", client_id, "notes:read notes:write"),
          access)
    check("a refresh token was issued", bool(signed.get("refresh_token")))

    for revision, mode in REVISIONS.items():
        result = anyio.run(call_tools, lab.info["mcp_url"], signed["access_token"], mode)
        check(f"MCP [{revision}]: negotiated", result["version"] == revision, result["version"])
        check(f"MCP [{revision}]: tools listed", result["tools"] == ["whoami", "list_notes", "add_note"], result["tools"])
        check(f"MCP [{revision}]: whoami is alice with both scopes",
              result["whoami"] == {"subject": "alice", "client_id": client_id, "scopes": ["notes:read", "notes:write"]},
              result["whoami"])
        check(f"MCP [{revision}]: add_note then list_notes",
              result["added"]["text"] in [n["text"] for n in result["notes"]["notes"]], result["notes"])
    calls = [json.loads(line) for line in Path(lab.info["calls_log"]).read_text().splitlines()]
    wanted = {"subject": "alice", "tool": "whoami", "client_id": client_id, "scopes": ["notes:read", "notes:write"],
              "status": "accepted"}
    check("calls log names subject, tool, client and scopes", any(wanted.items() <= c.items() for c in calls), calls[-6:])

    # A refresh may narrow the token's resource, never point it elsewhere.
    elsewhere = lab.sign_in(client_id, "alice", "notes:read", secret)
    wrong_aud = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=elsewhere["refresh_token"],
                          resource="http://127.0.0.1:9/other")
    check("a resource outside the grant is invalid_target", wrong_aud.json().get("error") == "invalid_target", wrong_aud.text)
    narrowed = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=signed["refresh_token"])
    check("refresh without resource keeps aud", claims(narrowed.json()["access_token"]).get("aud") == lab.info["mcp_url"])
    signed["refresh_token"] = narrowed.json()["refresh_token"]  # rotated: the old one is spent

    # Step-up: a notes:read token may read, but add_note is a 403 at the HTTP layer.
    reader = lab.sign_in(client_id, "bob", "notes:read", secret)
    denied = raw_tool_call(lab, reader["access_token"], "add_note", {"text": "nope"})
    params = www_authenticate(denied)
    check("add_note with only notes:read: 403 insufficient_scope, scope and resource_metadata",
          denied.status_code == 403 and params.get("error") == "insufficient_scope"
          and params.get("scope") == "notes:read notes:write"
          and params.get("resource_metadata") == lab.info["resource_metadata_url"],
          (denied.status_code, denied.headers.get("www-authenticate")))
    allowed = raw_tool_call(lab, reader["access_token"], "whoami", {})
    check("whoami with only notes:read works", allowed.status_code == 200 and '"bob"' in allowed.text, allowed.text[:200])
    garbage = raw_tool_call(lab, "not-a-token", "whoami", {})
    check("a bad token: 401 invalid_token", garbage.status_code == 401
          and www_authenticate(garbage).get("error") == "invalid_token", garbage.headers.get("www-authenticate"))

    # Rotation and reuse detection.
    first = signed["refresh_token"]
    rotated = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=first)
    second = rotated.json().get("refresh_token")
    check("refresh: new access and refresh token", rotated.status_code == 200 and second and second != first, rotated.text)
    replay = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=first)
    check("refresh: the rotated-out token is refused", replay.json().get("error") == "invalid_grant", replay.text)
    family = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=second)
    check("refresh: replay revoked the whole family (reuse detection)", family.json().get("error") == "invalid_grant", family.text)

    # RFC 7009 revocation, and introspection.
    fresh = lab.sign_in(client_id, "alice", "notes:read", secret)
    intro = lab.post("introspection_endpoint", client_id, secret, {"token": fresh["access_token"]}).json()
    check("introspection: active, alice", intro.get("active") is True and intro.get("sub") == "alice", intro)
    lab.post("revocation_endpoint", client_id, secret, {"token": fresh["refresh_token"]})
    after = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=fresh["refresh_token"])
    check("RFC 7009: a revoked refresh token is refused", after.json().get("error") == "invalid_grant", after.text)

    # The lab's server-side revoke of every refresh token of a user.
    kept = lab.sign_in(client_id, "alice", "notes:read", secret)
    check("lab revoke: revoked alice's refresh tokens", lab.revoke_user("alice", client_id) >= 1)
    gone = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=kept["refresh_token"])
    check("lab revoke: her refresh token is refused", gone.json().get("error") == "invalid_grant", gone.text)
    bobs = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=reader["refresh_token"])
    check("lab revoke: bob's refresh token still works", bobs.status_code == 200, bobs.text)

    check("count: alice's successful refresh grants",
          lab.count("--grant", "refresh_token", "--user", "alice", "--client", client_id) == 2)
    check("count: refused refresh grants", lab.count("--grant", "refresh_token", "--client", client_id,
                                                     "--status", "failed") >= 4)

    ttl = lab.info["access_token_ttl"]
    if ttl <= 20:
        token = lab.sign_in(client_id, "alice", "notes:read", secret)
        check("a fresh token works", raw_tool_call(lab, token["access_token"], "whoami", {}).status_code == 200)
        time.sleep(ttl + 1)
        late = raw_tool_call(lab, token["access_token"], "whoami", {})
        check(f"after --access-token-ttl {ttl}s: 401 invalid_token", late.status_code == 401
              and www_authenticate(late).get("error") == "invalid_token" and "expired" in late.text, late.text)
        renewed = lab.token(client_id, secret, grant_type="refresh_token", refresh_token=token["refresh_token"])
        check("refresh after expiry works", raw_tool_call(lab, renewed.json()["access_token"], "whoami", {}).status_code == 200)


def serve_metadata(lab: Lab) -> tuple[ThreadingHTTPServer, str]:
    """The client ID metadata document, on the http origin the lab's front forwards to."""
    path = "/oauth/client-metadata.json"
    client_id = lab.info["cimd_front"] + path
    document = json.dumps({
        "client_id": client_id, "client_name": "smoke (metadata document)", "redirect_uris": [CALLBACK],
        "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"], "scope": "notes:read notes:write"}).encode()

    class Document(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            found = self.path == path
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document if found else b"{}")

        def log_message(self, *_args) -> None:
            pass

    port = urllib.parse.urlsplit(lab.info["cimd_upstream"]).port
    server = ThreadingHTTPServer(("127.0.0.1", port), Document)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, client_id


def check_metadata_document_client(lab: Lab) -> None:
    server, client_id = serve_metadata(lab)
    try:
        before = lab.count("--cimd-fetches")
        signed = lab.sign_in(client_id, "alice", "notes:read notes:write")
        check("CIMD: signed in with an https client_id", bool(signed.get("access_token")), signed)
        check("CIMD: nanoidp fetched the document through the front", lab.count("--cimd-fetches") == before + 1)
        check("CIMD: token's client_id is the URL", claims(signed["access_token"]).get("client_id") == client_id)
        check("CIMD: nanoidp issues no refresh token to such a client (known limit)", "refresh_token" not in signed)
        result = anyio.run(call_tools, lab.info["mcp_url"], signed["access_token"], "legacy")
        check("CIMD: whoami is alice", result["whoami"].get("subject") == "alice", result["whoami"])
        check("CIMD: counted as an authorization of that client",
              lab.count("--event", "authorization_request", "--client", client_id) == 1)
    finally:
        server.shutdown()


def check_no_metadata_documents(lab: Lab) -> None:
    response, _ = lab.authorize("https://127.0.0.1:9/oauth/client-metadata.json", "alice", "notes:read")
    check("without --cimd an https client_id is an unknown client", response.status_code == 400, response.text[:200])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()
    lab = Lab(args.state_dir)
    check_discovery(lab)
    if lab.info["dcr"]:
        check_registered_client(lab)
    if lab.info["cimd"]:
        check_metadata_document_client(lab)
    else:
        check_no_metadata_documents(lab)
    if lab.info.get("preregistered_client"):
        client = lab.info["preregistered_client"]
        signed = lab.sign_in(client["client_id"], "bob", "notes:read", client["client_secret"])
        check("pre-registered client: signed in", claims(signed["access_token"]).get("sub") == "bob")
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
