-- Who asked each running answer, so that the replica that takes it over after a
-- crash (or this process, at its next start) can go on with it as that person: their
-- roles for the tool policy, and their access token for tools that act as them
-- (exchanged at the issuer, as when they asked). Only answers of the chat API have
-- one: an answer of the OpenAI-compatible API has nobody to come back to it.
-- A row lives as long as its answer runs: it is deleted when the answer ends, and
-- the token in it expires within minutes anyway.
CREATE TABLE answer_askers (
    message_id TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    name       TEXT,
    email      TEXT,
    -- A JSON array of role names.
    roles      TEXT NOT NULL,
    -- 'bearer' or 'session'.
    via        TEXT NOT NULL,
    credential TEXT,
    -- How many times the answer has been taken over.
    resumes    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
