-- What people are shown of a tool call as it streams ("Look up tables · limit 2"),
-- kept with the call so that a conversation read later shows it the same way. Calls
-- stored before have none; the conversation view shows their tool's name instead.
ALTER TABLE tool_calls ADD COLUMN title TEXT;
