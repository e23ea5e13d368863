-- The idempotency key the gateway minted for a call of a tool that writes, stored
-- with the call before it is sent and sent in the call's `_meta` as
-- `io.maitred/idempotencyKey`: the MCP server passes it to the backend as its
-- `Idempotency-Key`, so a call sent again does not act twice. Reads, and calls
-- stored before, have none.
ALTER TABLE tool_calls ADD COLUMN idempotency_key TEXT;
