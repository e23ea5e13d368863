-- Connected accounts: each person's own sign-in at an MCP server that runs its own
-- authorization server (auth.type = "user_oauth"). Tokens never leave the gateway:
-- `credentials` is the token response sealed with an AEAD key from the settings
-- (key_id names it, so keys can rotate), bound to its owner and server, so a row
-- copied to another person's or server's key does not open.
CREATE TABLE connected_accounts (
    owner               TEXT NOT NULL,
    server              TEXT NOT NULL,
    issuer              TEXT,
    client_id           TEXT NOT NULL,
    -- Granted, space-separated.
    scopes              TEXT NOT NULL,
    credentials         TEXT NOT NULL,
    key_id              TEXT NOT NULL,
    -- One more on each refresh: a replica that waited for another's refresh sees it.
    generation          BIGINT NOT NULL,
    -- When the access token expires (unix ms), when known.
    expires_at          BIGINT,
    connected_at        TEXT NOT NULL,
    refreshed_at        TEXT,
    -- One refresh at a time across the replicas: the one holding the lease refreshes,
    -- the others wait for the next generation.
    refresh_lease_until BIGINT NOT NULL DEFAULT 0,
    refresh_lease_owner TEXT,
    PRIMARY KEY (owner, server)
);

-- Sign-ins under way. The `state` parameter itself is never stored: its SHA-256 is
-- the key. A row is used once (used_at), by its owner, before expires_at (unix ms).
CREATE TABLE account_authorizations (
    state_hash   TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    server       TEXT NOT NULL,
    -- The tool call waiting for it, if a call asked (not the accounts panel).
    tool_call_id TEXT,
    -- The PKCE verifier and the expected issuer, sealed.
    sealed       TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    client_id    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      TEXT
);
CREATE INDEX account_authorizations_expiry ON account_authorizations (expires_at);

-- How the gateway is registered at each server's authorization server, shared by
-- the replicas so one dynamic registration serves them all.
CREATE TABLE account_clients (
    server        TEXT NOT NULL,
    issuer        TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('metadata_document', 'dynamic', 'preregistered')),
    client_id     TEXT NOT NULL,
    -- A dynamic registration's secret, sealed; none for a public client.
    secret        TEXT,
    key_id        TEXT,
    registered_at TEXT NOT NULL,
    PRIMARY KEY (server, issuer)
);

-- The gateway's own "Connect <server>" card, as JSON, on the request it shows.
ALTER TABLE tool_inputs ADD COLUMN connect TEXT;
