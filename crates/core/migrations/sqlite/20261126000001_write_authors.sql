-- Who made each write, and through whom: the person a token is about (its `sub`)
-- and the clients that acted for them (its RFC 8693 `act` chain, newest first,
-- space-separated). A write made by a client for no person names the client.

ALTER TABLE bookings ADD COLUMN created_by TEXT;
ALTER TABLE bookings ADD COLUMN created_via TEXT;
ALTER TABLE bookings ADD COLUMN updated_by TEXT;
ALTER TABLE bookings ADD COLUMN updated_via TEXT;

-- One row per write, never changed or removed (the triggers refuse it).
CREATE TABLE write_audit (
    id            TEXT PRIMARY KEY,
    at            TEXT NOT NULL,
    person        TEXT NOT NULL,
    -- The acting clients as a JSON array, newest first; [] for a token held by the
    -- person or client itself.
    actors        TEXT NOT NULL,
    -- The gateway's tool call that asked for the write, when one did.
    tool_call_id  TEXT,
    action        TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id   TEXT NOT NULL
);
CREATE INDEX write_audit_at ON write_audit (at, id);

CREATE TRIGGER write_audit_no_update BEFORE UPDATE ON write_audit
BEGIN
    SELECT RAISE(ABORT, 'write_audit is append-only');
END;
CREATE TRIGGER write_audit_no_delete BEFORE DELETE ON write_audit
BEGIN
    SELECT RAISE(ABORT, 'write_audit is append-only');
END;
