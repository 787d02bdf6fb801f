-- +goose Up
-- Messages waiting to be published, written in the same transaction as the
-- state change they announce. txid records the writing transaction so the
-- relay can hold back rows of transactions that might still be running
-- below a later, already visible row (see selectPublishable in relay.go).
--
-- A row Kafka will never accept (too large, invalid, for a topic that does
-- not exist) is refused instead of being retried forever ahead of every other
-- row: refused_at excludes it from publishing, last_error says why, and the
-- row stays for inspection until an operator fixes and retries it
-- (UPDATE outbox SET refused_at = NULL WHERE id = ...).
CREATE TABLE outbox (
    id         bigserial   PRIMARY KEY,
    txid       xid8        NOT NULL DEFAULT pg_current_xact_id(),
    topic      text        NOT NULL,
    key        bytea,
    value      bytea       NOT NULL,
    headers    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    refused_at timestamptz,
    last_error text
);

-- The rows the relay reads on every round: neither sent nor refused, so a
-- refused row does not sit in the index it scans.
CREATE INDEX outbox_publishable ON outbox (txid, id)
    WHERE sent_at IS NULL AND refused_at IS NULL;

-- The relay's cleanup deletes sent rows past Retention, oldest first.
CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- The backlog gauges count the refused rows every second; without an index of
-- their own the count would read the whole table, sent rows kept for
-- Retention included. Refused rows are few, so this index is tiny.
CREATE INDEX outbox_refused ON outbox (id)
    WHERE refused_at IS NOT NULL AND sent_at IS NULL;

-- +goose Down
DROP TABLE outbox;
