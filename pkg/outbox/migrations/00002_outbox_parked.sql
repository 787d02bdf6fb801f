-- +goose Up
-- A row Kafka will never accept (too large, invalid, for a topic that does
-- not exist) is parked instead of being retried forever ahead of every other
-- row: parked_at excludes it from publishing, last_error says why, and the
-- row stays for inspection until an operator fixes and releases it
-- (UPDATE outbox SET parked_at = NULL WHERE id = ...).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS parked_at timestamptz;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS last_error text;

-- The relay reads only rows that are neither sent nor parked; a parked row
-- must not sit in the index it scans on every round. Created under a new
-- name so that this migration is safe to run again.
CREATE INDEX IF NOT EXISTS outbox_publishable ON outbox (txid, id)
    WHERE sent_at IS NULL AND parked_at IS NULL;
DROP INDEX IF EXISTS outbox_unsent;

-- +goose Down
CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (txid, id) WHERE sent_at IS NULL;
DROP INDEX IF EXISTS outbox_publishable;
ALTER TABLE outbox DROP COLUMN IF EXISTS last_error;
ALTER TABLE outbox DROP COLUMN IF EXISTS parked_at;
