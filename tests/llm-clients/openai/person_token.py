#!/usr/bin/env python3
"""Prints an access token for a demo person of a fresh maitred (dev mode): signs in as
`--username` at the built-in issuer's login page, as a browser does for the web
client, and redeems the code (authorization code with PKCE S256).

    person_token.py --issuer http://localhost:8080 --gateway http://localhost:8081 \
        --credentials data/dev-credentials.json --username user
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import secrets
import sys
from urllib.parse import parse_qs, urlparse

import httpx


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--gateway", required=True, help="the web client's redirect goes there")
    parser.add_argument("--credentials", required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--scope", default="openid chat.read chat.write")
    args = parser.parse_args()
    with open(args.credentials, encoding="utf-8") as file:
        password = json.load(file)["users"][args.username]["password"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    redirect = f"{args.gateway}/login/callback"
    query = {
        "response_type": "code", "client_id": "maitred-web", "redirect_uri": redirect,
        "scope": args.scope, "state": "st", "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
    }
    with httpx.Client(follow_redirects=False) as browser:
        page = browser.get(f"{args.issuer}/oauth2/authorize", params=query)
        page.raise_for_status()
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        if not csrf:
            print("no login form", file=sys.stderr)
            return 1
        form = dict(query, csrf_token=csrf.group(1), username=args.username, password=password)
        signed_in = browser.post(f"{args.issuer}/oauth2/authorize", data=form,
                                 headers={"origin": args.issuer})
        if signed_in.status_code != 303:
            print(f"sign-in: {signed_in.status_code} {signed_in.text[:200]}", file=sys.stderr)
            return 1
        code = parse_qs(urlparse(signed_in.headers["location"]).query)["code"][0]
        tokens = httpx.post(f"{args.issuer}/oauth2/token", data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
            "code_verifier": verifier, "client_id": "maitred-web",
        })
        tokens.raise_for_status()
    print(tokens.json()["access_token"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
