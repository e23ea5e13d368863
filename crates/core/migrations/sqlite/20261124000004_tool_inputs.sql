-- What an MCP server asked the person in the middle of a tool call (MCP
-- elicitation: a form, or a URL to open), and the answer: who gave it, when, and
-- what. The answer is a single-winner update of the pending row, like an approval's.

CREATE TABLE tool_inputs (
    id           TEXT PRIMARY KEY,
    tool_call_id TEXT NOT NULL REFERENCES tool_calls(id) ON DELETE CASCADE,
    message_id   TEXT NOT NULL,
    owner        TEXT NOT NULL,
    server       TEXT NOT NULL,
    tool         TEXT NOT NULL,
    message      TEXT NOT NULL,
    mode         TEXT NOT NULL CHECK (mode IN ('form', 'url')),
    -- The requested schema (form) as JSON, or the URL to open (url).
    schema       TEXT,
    url          TEXT,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'cancelled', 'expired')),
    -- The accepted form's content, as JSON.
    content      TEXT,
    -- The input_required event's place in the answer's stream, once shown.
    event_seq    INTEGER,
    decided_by   TEXT,
    created_at   TEXT NOT NULL,
    decided_at   TEXT,
    expires_at   TEXT NOT NULL
);
CREATE INDEX tool_inputs_message ON tool_inputs (message_id, status);
