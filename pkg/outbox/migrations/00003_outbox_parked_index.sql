-- +goose Up
-- The backlog gauges count the parked rows every second; without an index
-- of their own the count read the whole table, sent rows kept for
-- Retention included: under load, a scan of a few hundred milliseconds
-- every second in every service's database. Parked rows are few, so this
-- index is tiny.
--
-- Built in the migration's transaction, which blocks new outbox rows while
-- it reads the table once: quick on a table holding an hour of rows. On a
-- larger one, build it first by hand, without blocking —
--   CREATE INDEX CONCURRENTLY outbox_parked ON outbox (id)
--     WHERE parked_at IS NOT NULL AND sent_at IS NULL;
-- — and this statement finds it there.
-- The build waits for the SHARE lock behind open outbox writers, and every
-- new writer would queue behind it: give up after a few seconds instead
-- (the service fails to start and tries again) rather than stall them all.
SET LOCAL lock_timeout = '5s';
CREATE INDEX IF NOT EXISTS outbox_parked ON outbox (id)
    WHERE parked_at IS NOT NULL AND sent_at IS NULL;

-- +goose Down
DROP INDEX IF EXISTS outbox_parked;
