-- One refresh at a time per browser session, across every gateway replica: the one
-- that claims the row refreshes, the others wait for its result. Two refreshes with
-- the same token would look like a stolen token to the issuer and end the login.
ALTER TABLE browser_sessions ADD COLUMN refreshing_until INTEGER;
