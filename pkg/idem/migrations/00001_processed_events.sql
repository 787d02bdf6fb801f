-- +goose Up
-- One row per event a consumer has applied. The primary key is the whole
-- idempotency guarantee: a second insert of the same (consumer, event_id)
-- conflicts, even when both transactions race.
--
-- topic, kafka_partition and kafka_offset say where the event was read, so
-- that retention prunes a mark only once Kafka can no longer deliver its
-- event again (see idem.Prune and participant.Pruner).
CREATE TABLE processed_events (
    consumer        text        NOT NULL,
    event_id        uuid        NOT NULL,
    processed_at    timestamptz NOT NULL DEFAULT now(),
    topic           text,
    kafka_partition int,
    kafka_offset    bigint,
    PRIMARY KEY (consumer, event_id)
);

-- Prune looks below an offset and filters on age; processed_at in the
-- index lets it do that without visiting the table's rows.
CREATE INDEX processed_events_origin
    ON processed_events (consumer, topic, kafka_partition, kafka_offset) INCLUDE (processed_at);

-- +goose Down
DROP TABLE processed_events;
