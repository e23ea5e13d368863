-- Responses of the OpenAI Responses API (`POST /v1/responses`): one per answer it
-- started, under the answer's message id (the API shows `resp_…` for `msg_…`). The
-- answer itself is stored as every answer is (its conversation, parts and tool
-- calls); this row keeps what the API echoes back and, once the answer has ended,
-- its events as they were logged, so that the response, and its stream replayed,
-- can be read after the live log of its answer has expired. Deleted with its
-- conversation.
CREATE TABLE responses (
    id              TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    -- The response it continues (`previous_response_id`).
    previous_id     TEXT,
    -- The model as the request named it (`maitred` or `maitred/<model>`).
    model           TEXT NOT NULL,
    instructions    TEXT,
    -- A JSON object of strings.
    metadata        TEXT NOT NULL,
    -- 1: `background: true` (it runs whether or not anybody watches).
    background      BIGINT NOT NULL DEFAULT 0,
    -- 0: `store: false` (it cannot be read, continued or deleted by its id).
    stored          BIGINT NOT NULL DEFAULT 1,
    -- A JSON array of the tool calls whose approval requests it answered.
    decided         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    -- Once its answer has ended: the answer's events, a JSON array of
    -- [seq, name, data].
    events          TEXT
);
CREATE INDEX responses_owner ON responses (owner, created_at);
CREATE INDEX responses_conversation ON responses (conversation_id);
