#!/usr/bin/env python3
"""The connected-accounts lab: real third-party parts for maitred's issue 28 tests.

A person signs in, with authorization code + PKCE, to a third-party MCP server that
runs its own authorization server. Here that server pair is:

- nanoidp (PyPI), a real OAuth 2 / OIDC authorization server, configured from flags;
- notes_server.py, an MCP server on the official Python SDK whose every request needs
  a nanoidp access token for its URL (RFC 8707 audience);
- optionally cimd_front.py, an https front that lets nanoidp fetch a client ID
  metadata document which the gateway serves over plain http on loopback.

    lab.py run --state-dir DIR [--idp-port N] [--mcp-port N] [--dcr on|off] [--cimd on|off] ...
    lab.py count --state-dir DIR --grant refresh_token [--user alice] [--client ID]
    lab.py count --state-dir DIR --event client_registered
    lab.py count --state-dir DIR --cimd-fetches
    lab.py revoke --state-dir DIR --user alice [--client ID]

`run` is the default subcommand. It writes DIR/ready.json once every part answers
HTTP, and stops every part on SIGTERM/SIGINT. README.md says what each flag does.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import math
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCOPES = ["notes:read", "notes:write"]
# The vocabulary nanoidp accepts at all; a scope outside it is invalid_scope everywhere.
VOCABULARY = ["openid", "profile", "email", "offline_access", *SCOPES]
DEFAULT_USERS = ["alice:alice-lab-password", "bob:bob-lab-password"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError("on or off")
    return value == "on"


# ---------------------------------------------------------------------------- TLS
# RFC 9207's `iss` is only sent by nanoidp when its issuer is https, and it fetches
# client ID metadata documents over https only; so the lab makes its own small CA.


def make_tls(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 and localhost signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        return ca_path, cert_path, key_path
    now = datetime.datetime.now(datetime.timezone.utc)
    validity = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=30))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "maitred connected-accounts lab CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(validity[0]).not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(validity[0]).not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return ca_path, cert_path, key_path


# ------------------------------------------------------------------ nanoidp config


def yaml_doc(value) -> str:
    """JSON is YAML: nanoidp reads these files with a YAML parser."""
    return json.dumps(value, indent=2) + "\n"


def write_nanoidp_config(args, state: Path, issuer: str, audit_log: Path) -> Path:
    config = state / "nanoidp"
    config.mkdir(exist_ok=True)
    clients = []
    if args.client_id:
        clients.append({
            "client_id": args.client_id,
            "client_secret": args.client_secret or "",
            "token_endpoint_auth_method": "client_secret_basic" if args.client_secret else "none",
            "description": "pre-registered by the lab",
            "redirect_uris": args.redirect_uri,
            "allowed_scopes": VOCABULARY,
        })
    settings = {
        "config_version": 1,
        # An unknown key is a typo here, never something to ignore.
        "config_validation": "strict",
        # OAuth 2.1 strictness: PKCE required with S256 only ('plain' refused), refresh
        # tokens rotated with reuse detection, no password grant, and /authorize only
        # for clients with registered redirect_uris.
        "security_profile": "oauth21",
        "server": {"host": "127.0.0.1", "port": args.idp_port},
        "oauth": {
            "issuer": issuer,
            # The aud of tokens requested without `resource` (refresh tokens always).
            "audience": "nanoidp-lab",
            "token_expiry_minutes": max(1, math.ceil(args.access_token_ttl / 60)),
            "refresh_token_expiry_minutes": max(1, math.ceil(args.refresh_token_ttl / 60)),
            "refresh_token_rotation": True,
            "require_pkce": True,
            "scopes_supported": VOCABULARY,
            "clients": clients,
            "dynamic_registration": {"enabled": args.dcr, "max_clients": 1000},
            "client_id_metadata_documents": {
                "enabled": args.cimd,
                # Exact host:port of the lab's https front, nothing else.
                "allowed_hosts": [f"127.0.0.1:{args.cimd_port}", f"localhost:{args.cimd_port}"] if args.cimd else [],
                # The draft's development exception: a loopback document, fetched only
                # because nanoidp itself is bound to 127.0.0.1.
                "allow_loopback": args.cimd,
            },
        },
        "jwt": {"keys_dir": str(config / "keys")},
        "session": {"secret_key": os.urandom(24).hex()},
        "logging": {"level": "INFO"},
        # Every audit event, as one JSON line: nanoidp's own audit, kept whole (its
        # in-memory copy behind /api/audit keeps only the last 1000).
        "hooks": {"on_audit_event": f"awk 1 >> {shlex.quote(str(audit_log))}"},
    }
    users = {"config_version": 1, "users": {}}
    for name, password in args.users.items():
        users["users"][name] = {"password": password, "email": f"{name}@example.org", "roles": ["USER"]}
    (config / "settings.yaml").write_text(yaml_doc(settings))
    (config / "users.yaml").write_text(yaml_doc(users))
    return config


# ------------------------------------------------------------------------ running


def wait_http(url: str, ca: Path | None, proc: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.stderr.write(log.read_text(errors="replace")[-4000:])
            raise SystemExit(f"lab: the process behind {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                if response.status < 500:
                    return
        except urllib.error.HTTPError as error:
            if error.code < 500:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"lab: {url} did not answer within {seconds:.0f}s (log: {log})")


def cmd_run(args) -> int:
    state = Path(args.state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    ready = state / "ready.json"
    ready.unlink(missing_ok=True)
    args.users = dict(u.split(":", 1) for u in args.user or DEFAULT_USERS)
    args.idp_port = args.idp_port or free_port()
    args.mcp_port = args.mcp_port or free_port()
    if args.cimd:
        args.cimd_port = args.cimd_port or free_port()
        if not args.cimd_upstream:
            raise SystemExit("lab: --cimd on needs --cimd-upstream (the http origin that serves the document)")

    ca, cert, key = make_tls(state / "tls")
    scheme = "https" if args.tls else "http"
    issuer = f"{scheme}://127.0.0.1:{args.idp_port}"
    mcp_url = f"http://127.0.0.1:{args.mcp_port}/mcp"
    audit_log, calls_log, cimd_log = state / "audit.jsonl", state / "calls.jsonl", state / "cimd_fetches.jsonl"
    config = write_nanoidp_config(args, state, issuer, audit_log)

    children: list[subprocess.Popen] = []

    def start(name: str, command: list[str], env: dict | None = None) -> tuple[subprocess.Popen, Path]:
        log = state / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=state,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        children.append(proc)
        return proc, log

    def stop(*_) -> None:
        for proc in children:
            if proc.poll() is None:
                proc.terminate()
        for proc in children:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def on_signal(signum, _frame) -> None:
        stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        idp_cmd = [sys.executable, str(HERE / "idp.py"), "--config", str(config),
                   "--host", "127.0.0.1", "--port", str(args.idp_port)]
        if args.tls:
            idp_cmd += ["--cert", str(cert), "--key", str(key)]
        # nanoidp fetches metadata documents with the default trust store: point it at
        # the lab CA, so the https front's certificate verifies like any real one.
        idp, idp_log = start("idp", idp_cmd, {"SSL_CERT_FILE": str(ca)})
        notes, notes_log = start("notes", [
            sys.executable, str(HERE / "notes_server.py"), "--port", str(args.mcp_port),
            "--issuer", issuer, "--ca-cert", str(ca), "--calls-log", str(calls_log),
            "--max-token-age", str(args.access_token_ttl),
            "--name", args.server_name, "--description", args.server_description,
        ])
        waits = [(f"{issuer}/.well-known/openid-configuration", idp, idp_log),
                 (f"http://127.0.0.1:{args.mcp_port}/healthz", notes, notes_log)]
        cimd_front = None
        if args.cimd:
            front, front_log = start("cimd_front", [
                sys.executable, str(HERE / "cimd_front.py"), "--port", str(args.cimd_port),
                "--upstream", args.cimd_upstream, "--cert", str(cert), "--key", str(key), "--log", str(cimd_log),
            ])
            cimd_front = f"https://127.0.0.1:{args.cimd_port}"
            waits.append((f"{cimd_front}/_lab/healthz", front, front_log))
        for url, proc, log in waits:
            wait_http(url, ca, proc, log)

        info = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register" if args.dcr else None,
            "revocation_endpoint": f"{issuer}/revoke",
            "introspection_endpoint": f"{issuer}/introspect",
            "jwks_uri": f"{issuer}/.well-known/jwks.json",
            "lab_revoke_endpoint": f"{issuer}/_lab/revoke",
            "ca_cert": str(ca),
            "mcp_url": mcp_url,
            "resource_metadata_url": f"http://127.0.0.1:{args.mcp_port}/.well-known/oauth-protected-resource/mcp",
            "server_name": args.server_name,
            "scopes": SCOPES,
            "users": args.users,
            # nanoidp's login page at /authorize (README.md: no consent page follows).
            "login_form": {"username": "#username", "password": "#password", "submit": "button[type=submit]",
                           "error_text": "Invalid username or password"},
            "dcr": args.dcr,
            "cimd": args.cimd,
            "cimd_front": cimd_front,
            "cimd_upstream": args.cimd_upstream if args.cimd else None,
            "preregistered_client": {
                "client_id": args.client_id, "client_secret": args.client_secret or None,
                "redirect_uris": args.redirect_uri,
            } if args.client_id else None,
            "access_token_ttl": args.access_token_ttl,
            "access_token_exp_seconds": 60 * max(1, math.ceil(args.access_token_ttl / 60)),
            "refresh_token_exp_seconds": 60 * max(1, math.ceil(args.refresh_token_ttl / 60)),
            "audit_log": str(audit_log),
            "calls_log": str(calls_log),
            "cimd_fetch_log": str(cimd_log) if args.cimd else None,
            "logs": {proc_name: str(state / f"{proc_name}.log") for proc_name in ["idp", "notes"]
                     + (["cimd_front"] if args.cimd else [])},
            "pid": os.getpid(),
        }
        partial = state / "ready.json.tmp"
        partial.write_text(json.dumps(info, indent=2) + "\n")
        partial.rename(ready)  # readers never see half a file
        print(f"lab: ready ({ready})", flush=True)

        while True:
            for proc in children:
                if proc.poll() is not None:
                    print(f"lab: {proc.args[1]} exited with {proc.returncode}; stopping", file=sys.stderr)
                    return 1
            time.sleep(0.5)
    finally:
        stop()
        ready.unlink(missing_ok=True)


# ------------------------------------------------------------------ count / revoke


def read_ready(state_dir: str) -> dict:
    path = Path(state_dir) / "ready.json"
    if not path.exists():
        raise SystemExit(f"lab: no {path}: is the lab running?")
    return json.loads(path.read_text())


def json_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cmd_count(args) -> int:
    state = Path(args.state_dir)
    if args.cimd_fetches:
        rows = [r for r in json_lines(state / "cimd_fetches.jsonl") if not args.path or r.get("path") == args.path]
        print(len(rows))
        return 0
    event = "token_request" if args.grant else args.event
    if not event:
        raise SystemExit("lab count: give --grant, --event or --cimd-fetches")
    count = 0
    for entry in json_lines(state / "audit.jsonl"):
        if entry.get("event_type") != event:
            continue
        if args.status != "any" and entry.get("status") != args.status:
            continue
        if args.grant and (entry.get("details") or {}).get("grant_type") != args.grant:
            continue
        if args.user and entry.get("username") != args.user:
            continue
        if args.client and entry.get("client_id") != args.client:
            continue
        count += 1
    print(count)
    return 0


def cmd_revoke(args) -> int:
    info = read_ready(args.state_dir)
    form = {"user": args.user, **({"client_id": args.client} if args.client else {})}
    request = urllib.request.Request(info["lab_revoke_endpoint"], data=urllib.parse.urlencode(form).encode())
    context = ssl.create_default_context(cafile=info["ca_cert"])
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        print(json.load(response)["revoked"])
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="start nanoidp and the notes MCP server")
    run.add_argument("--state-dir", required=True, help="where config, logs and ready.json go")
    run.add_argument("--idp-port", type=int, default=0, help="nanoidp's port (default: a free one)")
    run.add_argument("--mcp-port", type=int, default=0, help="the notes MCP server's port (default: a free one)")
    run.add_argument("--tls", type=on_off, default=True, metavar="on|off",
                     help="serve nanoidp over https with the lab CA (default on; RFC 9207 iss needs it)")
    run.add_argument("--user", action="append", metavar="NAME:PASSWORD",
                     help=f"a user who can sign in (repeatable; default {' '.join(DEFAULT_USERS)})")
    run.add_argument("--dcr", type=on_off, default=True, metavar="on|off", help="dynamic client registration (default on)")
    run.add_argument("--cimd", type=on_off, default=False, metavar="on|off",
                     help="client ID metadata documents via the lab's https front (default off)")
    run.add_argument("--cimd-port", type=int, default=0, help="the https front's port (default: a free one)")
    run.add_argument("--cimd-upstream", help="http origin the front forwards to, e.g. http://127.0.0.1:8081")
    run.add_argument("--access-token-ttl", type=int, default=300, metavar="SECONDS",
                     help="access tokens are refused by the notes server after this many seconds "
                          "(nanoidp's own exp is this rounded up to whole minutes)")
    run.add_argument("--refresh-token-ttl", type=int, default=3600, metavar="SECONDS",
                     help="refresh token lifetime, rounded up to whole minutes (default 3600)")
    run.add_argument("--client-id", help="a pre-registered client")
    run.add_argument("--client-secret", help="its secret (none: a public client)")
    run.add_argument("--redirect-uri", action="append", default=[], help="its redirect URI (repeatable)")
    run.add_argument("--server-name", default="notes", help="the MCP server's name")
    run.add_argument("--server-description", default=(
        "Personal notes. This server's tools are hidden until you sign in to it."))
    run.set_defaults(handler=cmd_run)

    count = sub.add_parser("count", help="count audit events of a running (or stopped) lab")
    count.add_argument("--state-dir", required=True)
    what = count.add_mutually_exclusive_group(required=True)
    what.add_argument("--grant", help="token_request events of this grant_type, e.g. refresh_token")
    what.add_argument("--event", help="events of this type, e.g. client_registered, authorization_request")
    what.add_argument("--cimd-fetches", action="store_true", help="documents fetched through the https front")
    count.add_argument("--user", help="only this username")
    count.add_argument("--client", help="only this client_id")
    count.add_argument("--status", default="success", choices=["success", "failed", "failure", "any"],
                       help="only events with this status (default success)")
    count.add_argument("--path", help="with --cimd-fetches: only this path")
    count.set_defaults(handler=cmd_count)

    revoke = sub.add_parser("revoke", help="revoke every refresh token nanoidp issued to a user")
    revoke.add_argument("--state-dir", required=True)
    revoke.add_argument("--user", required=True)
    revoke.add_argument("--client", help="only those issued to this client_id")
    revoke.set_defaults(handler=cmd_revoke)

    if argv and argv[0] not in sub.choices and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    if args.command == "run" and args.client_id and not args.redirect_uri:
        parser.error("--client-id needs --redirect-uri (the oauth21 profile requires registered ones)")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
