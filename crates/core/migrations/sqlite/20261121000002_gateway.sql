-- The gateway: browser sessions (the BFF login), conversations with every message,
-- tool call and approval, and token usage. Same portable types as the first migration.

CREATE TABLE login_attempts (
    state         TEXT PRIMARY KEY,
    code_verifier TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    return_to     TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);

CREATE TABLE browser_sessions (
    id_hash          TEXT PRIMARY KEY,
    subject          TEXT NOT NULL,
    name             TEXT,
    email            TEXT,
    roles            TEXT NOT NULL,
    scopes           TEXT NOT NULL,
    refresh_token    TEXT,
    access_expires_at INTEGER NOT NULL,
    csrf_token       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
);

CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    title      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX conversations_owner ON conversations (owner, updated_at);

-- One row per user question, per model turn and per tool result, in `seq` order.
CREATE TABLE chat_messages (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    generation_id   TEXT,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content         TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    status          TEXT NOT NULL,
    model           TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE INDEX chat_messages_generation ON chat_messages (generation_id);

CREATE TABLE tool_calls (
    id              TEXT PRIMARY KEY,
    generation_id   TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    -- The model turn (chat_messages row) that asked for the call.
    turn_id         TEXT NOT NULL,
    model_call_id   TEXT NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    status          TEXT NOT NULL,
    duration_ms     INTEGER,
    summary         TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX tool_calls_turn ON tool_calls (turn_id);

CREATE TABLE approvals (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    owner           TEXT NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'remembered', 'cancelled')),
    remember_until  TEXT,
    decided_by      TEXT,
    created_at      TEXT NOT NULL,
    decided_at      TEXT,
    expires_at      TEXT NOT NULL
);
CREATE INDEX approvals_conversation ON approvals (conversation_id, tool);

CREATE TABLE token_usage (
    id                TEXT PRIMARY KEY,
    generation_id     TEXT NOT NULL,
    conversation_id   TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    owner             TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    total_tokens      INTEGER NOT NULL,
    created_at        TEXT NOT NULL
);
