-- +goose Up
-- Retention (Store.Forget) looks for the events Kafka no longer holds:
-- those of a partition below its earliest offset. This index finds them
-- by range, in offset order, without reading the rest of the table.
--
-- Built in the migration's transaction, which blocks new events while it
-- reads the table once: quick on a young table. On a large one, build it
-- first by hand, without blocking —
--   CREATE INDEX CONCURRENTLY tracked_events_origin
--     ON tracked_events (topic, partition, "offset");
-- — and this statement finds it there.
-- The build waits for the SHARE lock behind open writers, and every new
-- writer would queue behind it: give up after a few seconds instead (the
-- tracker fails to start and tries again) rather than stall them all.
SET LOCAL lock_timeout = '5s';
CREATE INDEX IF NOT EXISTS tracked_events_origin
    ON tracked_events (topic, partition, "offset");

-- +goose Down
DROP INDEX IF EXISTS tracked_events_origin;
