-- The restaurant domain and the identity provider's state.
-- The PostgreSQL twin of migrations/sqlite: same tables, same portable types (the app
-- talks to both through sqlx's Any driver), BIGINT for every integer, DOUBLE PRECISION
-- for reals, and byte-order collation on the text columns that hold dates and times.
-- Booleans are 0/1; timestamps are canonical UTC text 'YYYY-MM-DDTHH:MM:SS.mmmZ'
-- (fixed width, so text order is time order); dates 'YYYY-MM-DD'; times 'HH:MM'.

CREATE TABLE restaurants (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    email         TEXT,
    phone         TEXT,
    slug          TEXT,
    language_code TEXT NOT NULL DEFAULT 'en',
    address       TEXT
);

CREATE TABLE areas (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    internal_note    TEXT,
    booking_priority BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE dining_tables (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    seats_min     BIGINT NOT NULL CHECK (seats_min >= 1),
    seats_max     BIGINT NOT NULL CHECK (seats_max >= seats_min),
    area_id       TEXT NOT NULL REFERENCES areas(id),
    internal_note TEXT
);

CREATE TABLE customers (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    email           TEXT,
    phone           TEXT,
    created_at      TEXT COLLATE "C" NOT NULL,
    last_booking_at TEXT COLLATE "C",
    booking_count   BIGINT NOT NULL DEFAULT 0,
    total_spent     DOUBLE PRECISION NOT NULL DEFAULT 0,
    metadata        TEXT
);
CREATE INDEX customers_email ON customers (email);

CREATE TABLE opening_hours (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    date       TEXT COLLATE "C" NOT NULL,
    opens      TEXT COLLATE "C" NOT NULL,
    closes     TEXT COLLATE "C" NOT NULL,
    is_open    BIGINT NOT NULL DEFAULT 1,
    max_people BIGINT NOT NULL,
    metadata   TEXT,
    UNIQUE (date, name)
);

CREATE TABLE bookings (
    id                 TEXT PRIMARY KEY,
    date               TEXT COLLATE "C" NOT NULL,
    time               TEXT COLLATE "C" NOT NULL,
    people             BIGINT NOT NULL CHECK (people BETWEEN 1 AND 999),
    duration           BIGINT NOT NULL CHECK (duration BETWEEN 15 AND 480),
    status             TEXT NOT NULL,
    customer_id        TEXT REFERENCES customers(id),
    guest_name         TEXT NOT NULL,
    guest_email        TEXT,
    guest_phone        TEXT,
    notification_sms   BIGINT NOT NULL DEFAULT 0,
    notification_email BIGINT NOT NULL DEFAULT 0,
    source             TEXT NOT NULL DEFAULT 'other',
    opening_hour_id    TEXT REFERENCES opening_hours(id),
    comment            TEXT,
    language_code      TEXT NOT NULL DEFAULT 'en',
    referrer           TEXT,
    metadata           TEXT,
    created_at         TEXT COLLATE "C" NOT NULL,
    activity_at        TEXT COLLATE "C" NOT NULL
);
CREATE INDEX bookings_date ON bookings (date, time);
CREATE INDEX bookings_customer ON bookings (customer_id);

CREATE TABLE booking_tables (
    booking_id TEXT NOT NULL REFERENCES bookings(id),
    table_id   TEXT NOT NULL REFERENCES dining_tables(id),
    PRIMARY KEY (booking_id, table_id)
);

-- The database-level guard against double booking: an active booking owns one row per
-- table and 15-minute slot it touches, so two overlapping bookings of one table
-- collide on this primary key whatever the isolation level or the number of writers.
CREATE TABLE table_slots (
    table_id   TEXT NOT NULL REFERENCES dining_tables(id),
    slot       BIGINT NOT NULL,
    booking_id TEXT NOT NULL REFERENCES bookings(id),
    PRIMARY KEY (table_id, slot)
);
CREATE INDEX table_slots_booking ON table_slots (booking_id);

CREATE TABLE booking_notes (
    id         TEXT PRIMARY KEY,
    booking_id TEXT NOT NULL REFERENCES bookings(id),
    kind       TEXT NOT NULL CHECK (kind IN ('comment', 'note')),
    text       TEXT NOT NULL,
    author     TEXT,
    created_at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX booking_notes_booking ON booking_notes (booking_id, created_at);

CREATE TABLE feedback (
    id          TEXT PRIMARY KEY,
    booking_id  TEXT REFERENCES bookings(id),
    customer_id TEXT REFERENCES customers(id),
    rating      BIGINT NOT NULL CHECK (rating BETWEEN 1 AND 5),
    comment     TEXT,
    is_public   BIGINT NOT NULL DEFAULT 0,
    created_at  TEXT COLLATE "C" NOT NULL
);

CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY,
    alg         TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL
);

CREATE TABLE authorization_codes (
    code_hash      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    subject        TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    scope          TEXT NOT NULL,
    resource       TEXT,
    code_challenge TEXT,
    nonce          TEXT,
    family_id      TEXT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used           BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family_id  TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    scope      TEXT NOT NULL,
    resource   TEXT,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,
    revoked    BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
