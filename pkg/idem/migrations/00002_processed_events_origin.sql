-- +goose Up
-- Where each processed event was read (topic, partition, offset), so that
-- retention can prune a mark only once Kafka can no longer deliver its
-- event again: below the group's committed offset and older than the
-- topic's retention (see Prune). Marks from before have no origin and are
-- never pruned by it.
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS topic text;
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS kafka_partition int;
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS kafka_offset bigint;
CREATE INDEX IF NOT EXISTS processed_events_origin
    ON processed_events (consumer, topic, kafka_partition, kafka_offset);

-- +goose Down
DROP INDEX IF EXISTS processed_events_origin;
ALTER TABLE processed_events DROP COLUMN IF EXISTS kafka_offset;
ALTER TABLE processed_events DROP COLUMN IF EXISTS kafka_partition;
ALTER TABLE processed_events DROP COLUMN IF EXISTS topic;
