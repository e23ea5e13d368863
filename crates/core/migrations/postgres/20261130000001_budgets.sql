-- Budgets in tokens and money (micro-units of the prices' currency), set by an ADMIN.
-- scope: person (subject = the person's owner key), role (subject = the role's name)
-- or conversation (subject = its id); subject '*' is the default for every person or
-- every conversation, each counted on its own. window: total, daily or monthly (UTC).
CREATE TABLE budgets (
    scope            TEXT NOT NULL CHECK (scope IN ('person', 'role', 'conversation')),
    subject          TEXT NOT NULL,
    time_window      TEXT NOT NULL CHECK (time_window IN ('total', 'daily', 'monthly')),
    max_tokens       BIGINT,
    max_cost_micros  BIGINT,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (scope, subject)
);

-- The ledger: one row per model turn and budget it was reserved against. A row is
-- open (status 'reserved') while the turn runs; closing it sets settled (the real
-- usage) and refunded (the rest), so reserved = settled + refunded for every closed
-- row. What a budget has spent in a period is the sum of its open rows' reserved and
-- its closed rows' settled amounts.
CREATE TABLE budget_ledger (
    id                       TEXT PRIMARY KEY,
    -- One reservation (a model turn) has a row per budget it touched.
    reservation_id           TEXT NOT NULL,
    scope                    TEXT NOT NULL,
    -- The subject counted: the person, role or conversation (never '*').
    subject                  TEXT NOT NULL,
    -- The window's period: 'total', '2026-11-30' or '2026-11'.
    period                   TEXT NOT NULL,
    message_id               TEXT NOT NULL,
    model                    TEXT NOT NULL,
    status                   TEXT NOT NULL CHECK (status IN ('reserved', 'settled')),
    reserved_tokens          BIGINT NOT NULL,
    reserved_cost_micros     BIGINT NOT NULL,
    settled_tokens           BIGINT NOT NULL DEFAULT 0,
    settled_cost_micros      BIGINT NOT NULL DEFAULT 0,
    refunded_tokens          BIGINT NOT NULL DEFAULT 0,
    refunded_cost_micros     BIGINT NOT NULL DEFAULT 0,
    created_at               TEXT NOT NULL,
    settled_at               TEXT
);
CREATE INDEX budget_ledger_period ON budget_ledger (scope, subject, period);
CREATE INDEX budget_ledger_reservation ON budget_ledger (reservation_id);
CREATE INDEX budget_ledger_message ON budget_ledger (message_id);
-- Open rows by age: those a crashed gateway left open are closed after a while.
CREATE INDEX budget_ledger_open ON budget_ledger (status, created_at);
