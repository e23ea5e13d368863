-- Answers being written, and their events as they were shown. Without Redis, an
-- event reaches a viewer only once it is committed here; after a crash the events
-- say what the person saw, so the stored answer keeps every token of it.

CREATE TABLE answers (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    owner           TEXT NOT NULL,
    -- The gateway process that runs it (its id is kept in the data dir).
    replica         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    created_at      TEXT NOT NULL,
    finished_at     TEXT
);
CREATE INDEX answers_running ON answers (replica, status);

CREATE TABLE answer_events (
    message_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    name       TEXT NOT NULL,
    data       TEXT NOT NULL,
    PRIMARY KEY (message_id, seq)
);
