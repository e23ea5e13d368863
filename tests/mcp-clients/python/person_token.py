#!/usr/bin/env python3
"""A person's own access token for maitred's MCP server, as an MCP client on the
person's machine gets one: the authorization code flow with PKCE at the issuer's login
page, through the demo public client maitred-desktop, for the MCP server's resource.
Not exchanged by anyone: the person signs in and the client holds their token.

    person_token.py --issuer http://127.0.0.1:8080 --resource http://127.0.0.1:8082/mcp \\
        --user operator --password "$PASSWORD"

Prints the access token (only it) on stdout.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import http.cookiejar
import json
import re
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request

CLIENT = "maitred-desktop"
REDIRECT = "http://127.0.0.1:33418/callback"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """The client reads the code from the redirect; it does not follow it."""

    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--resource", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    args = parser.parse_args()

    cookies = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies), NoRedirect())
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
        "scope": "openid profile mcp.read mcp.write",
        "state": secrets.token_urlsafe(16),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": args.resource,
    }
    authorize = f"{args.issuer}/oauth2/authorize?{urllib.parse.urlencode(query)}"
    page = browser.open(authorize).read().decode()
    fields = {name: html.unescape(value) for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', page)}
    fields.update({"username": args.user, "password": args.password})
    request = urllib.request.Request(
        f"{args.issuer}/oauth2/authorize",
        data=urllib.parse.urlencode(fields).encode(),
        headers={"Origin": args.issuer},
    )
    try:
        browser.open(request)
        print("the sign-in did not redirect back to the client", file=sys.stderr)
        return 1
    except urllib.error.HTTPError as answer:
        location = answer.headers.get("Location", "")
    code = urllib.parse.parse_qs(urllib.parse.urlparse(location).query).get("code", [""])[0]
    if not code:
        print(f"no code in the redirect: {location}", file=sys.stderr)
        return 1
    token_request = urllib.request.Request(
        f"{args.issuer}/oauth2/token",
        data=urllib.parse.urlencode({
            "grant_type": "authorization_code",
            "client_id": CLIENT,
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        }).encode(),
    )
    tokens = json.load(urllib.request.urlopen(token_request))
    print(tokens["access_token"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
