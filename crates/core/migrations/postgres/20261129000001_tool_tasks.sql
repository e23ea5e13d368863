-- Tool calls their MCP server runs as a task (the Tasks extension, SEP-2663): the
-- answer that started one has ended; the cluster owns the task from then on. Any
-- replica polls it while it holds the lease (lease_owner until lease_until, unix ms),
-- and another takes it over when that replica dies. When it ends, its result is
-- posted once into the conversation as a new answer: follow_up_message_id is set by
-- the one update that sees it unset, so two replicas that see the end at once post it
-- once between them.
CREATE TABLE tool_tasks (
    id                   TEXT PRIMARY KEY,
    conversation_id      TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    -- The answer whose call started it, and that call.
    message_id           TEXT NOT NULL,
    tool_call_id         TEXT NOT NULL,
    model_call_id        TEXT NOT NULL,
    owner                TEXT NOT NULL,
    -- Who asked (name, email, roles, via as JSON; never a token): the follow-up
    -- answer is written for them.
    asker                TEXT NOT NULL,
    server               TEXT NOT NULL,
    tool                 TEXT NOT NULL,
    -- The tool's name as the model knows it (server__tool).
    exposed              TEXT NOT NULL,
    title                TEXT NOT NULL,
    arguments            TEXT NOT NULL,
    -- The server's id for it.
    task_id              TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message       TEXT,
    -- An outstanding request for input (input_required): key, message and schema as JSON.
    input                TEXT,
    -- The end: the result as the model is given it, or why it failed.
    result               TEXT,
    error                TEXT,
    poll_interval_ms     BIGINT NOT NULL,
    next_poll_at         BIGINT NOT NULL,
    give_up_at           BIGINT NOT NULL,
    -- Polls in a row that could not reach the server.
    failures             BIGINT NOT NULL DEFAULT 0,
    lease_owner          TEXT,
    lease_until          BIGINT NOT NULL DEFAULT 0,
    -- The person pressed Stop: tasks/cancel is sent by whichever replica polls next.
    cancel_requested     BIGINT NOT NULL DEFAULT 0,
    follow_up_message_id TEXT UNIQUE,
    -- When the follow-up answer was started; unset with follow_up_message_id set: the
    -- replica that claimed it died first, and it is posted again with the same id.
    follow_up_started_at BIGINT,
    created_at           TEXT COLLATE "C" NOT NULL,
    updated_at           TEXT COLLATE "C" NOT NULL,
    finished_at          TEXT COLLATE "C"
);
CREATE INDEX tool_tasks_due ON tool_tasks (status, next_poll_at);
CREATE INDEX tool_tasks_conversation ON tool_tasks (conversation_id, created_at);
CREATE INDEX tool_tasks_owner ON tool_tasks (owner, status);
