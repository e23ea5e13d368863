-- One name for one id: the answer a stored part belongs to is its message, the same
-- `message_id` the chat stream carries (it was `generation_id`, and the stream's id
-- had another prefix than the conversation's).
ALTER TABLE chat_messages RENAME COLUMN generation_id TO message_id;
ALTER TABLE tool_calls RENAME COLUMN generation_id TO message_id;
ALTER TABLE token_usage RENAME COLUMN generation_id TO message_id;
DROP INDEX chat_messages_generation;
CREATE INDEX chat_messages_message ON chat_messages (message_id);
CREATE INDEX tool_calls_message ON tool_calls (message_id);
