-- An answer's claims checked against its tool calls' results (the `grounding`
-- event's data, as JSON), kept with the turn that holds the answer's final text, so
-- a conversation read later shows the same marks as the stream did.
ALTER TABLE chat_messages ADD COLUMN grounding TEXT;
