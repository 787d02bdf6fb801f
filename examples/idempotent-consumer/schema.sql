-- The three tables of the pattern. Apply with Migrate; every statement is
-- idempotent, so applying it again is harmless.

-- One row per event applied. The primary key is the whole guarantee: a
-- second insert of the same id conflicts, even when two deliveries race.
-- Add a consumer column to the key when several consumers share a database.
CREATE TABLE IF NOT EXISTS processed_events (
    event_id     text        PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- The business state the events change.
CREATE TABLE IF NOT EXISTS accounts (
    id      text   PRIMARY KEY,
    balance bigint NOT NULL
);

-- Events to publish, written in the transaction that made them true;
-- Relay publishes them and sets sent_at.
CREATE TABLE IF NOT EXISTS outbox (
    id      bigserial   PRIMARY KEY,
    topic   text        NOT NULL,
    key     text        NOT NULL,
    value   bytea       NOT NULL,
    sent_at timestamptz
);
CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
