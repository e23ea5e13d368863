-- The browser session's current access token, so a tool that acts for the person
-- (token exchange) can be given theirs. It lives as long as the token (minutes) and
-- is replaced at every refresh; sessions from before get one at their next refresh.
ALTER TABLE browser_sessions ADD COLUMN access_token TEXT;
