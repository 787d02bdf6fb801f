-- +goose Up
-- Where each processed event was read (topic, partition, offset), so that
-- retention can prune a mark only once Kafka can no longer deliver its
-- event again (see idem.Prune and participant.Pruner). Marks from before
-- have no origin and are never pruned by it. The columns are nullable
-- without a default, so adding them rewrites nothing.
--
-- The index is built in the migration's transaction, which blocks new
-- marks while it is built: instant on a young table. On a large one,
-- build it first by hand, without blocking —
--   CREATE INDEX CONCURRENTLY processed_events_origin ON processed_events
--     (consumer, topic, kafka_partition, kafka_offset) INCLUDE (processed_at);
-- — and this statement finds it there. (Not CONCURRENTLY here: it waits
-- for every older transaction of the database while holding back the
-- cluster's xmin horizon, and so every relay, each time a service starts.)
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS topic text;
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS kafka_partition int;
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS kafka_offset bigint;
-- Prune looks below an offset and filters on age; processed_at in the
-- index lets it do that without visiting the table's rows.
CREATE INDEX IF NOT EXISTS processed_events_origin
    ON processed_events (consumer, topic, kafka_partition, kafka_offset) INCLUDE (processed_at);

-- +goose Down
DROP INDEX IF EXISTS processed_events_origin;
ALTER TABLE processed_events DROP COLUMN IF EXISTS kafka_offset;
ALTER TABLE processed_events DROP COLUMN IF EXISTS kafka_partition;
ALTER TABLE processed_events DROP COLUMN IF EXISTS topic;
