-- The backend's idempotent writes: a write sent with an `Idempotency-Key` header is
-- recorded here under the caller (the token's subject and client) and that key, so a
-- repeat is answered with the stored response instead of running again. The primary
-- key is what lets only one of several concurrent repeats run: each INSERTs a pending
-- row (status NULL) and the one whose INSERT succeeds runs the write, then stores
-- its response; the others wait for it. Rows are deleted once expires_at passes.
CREATE TABLE idempotency_keys (
    subject       TEXT NOT NULL,
    client        TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    method        TEXT NOT NULL,
    path          TEXT NOT NULL,
    -- SHA-256 of the request body, lowercase hex.
    body_hash     TEXT NOT NULL,
    -- NULL while the first request runs.
    status        INTEGER,
    content_type  TEXT,
    response_body TEXT,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    PRIMARY KEY (subject, client, idem_key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
