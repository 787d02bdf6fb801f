-- +goose Up
-- What OUTBOX_RELAY=debezium needs (see cdc.go). Debezium's Outbox Event
-- Router can place a column as a Kafka header, not spread the headers
-- object into many: each header a Choreo message carries gets a column of
-- its own, copied from headers by outbox_cdc(). Generated columns would
-- say it in one line each, but logical replication leaves them out (before
-- PostgreSQL 18). outbox_cdc() also marks the row sent: Debezium has it
-- from the WAL once it commits, so a built-in relay started later must not
-- publish it again, and the sweep finds it by the sent_at index. The
-- trigger that calls it exists only while Debezium publishes
-- (outbox.Publish; outbox.Unpublish drops it), so the built-in relay's
-- inserts pay nothing and there the columns stay NULL.
ALTER TABLE outbox
    ADD COLUMN event_id             text,
    ADD COLUMN event_type           text,
    ADD COLUMN traceparent          text,
    ADD COLUMN dlq_reason           text,
    ADD COLUMN dlq_reason_base64    text,
    ADD COLUMN dlq_origin_topic     text,
    ADD COLUMN dlq_origin_partition text,
    ADD COLUMN dlq_origin_offset    text,
    ADD COLUMN dlq_consumer_group   text,
    ADD COLUMN dlq_failed_at        text,
    ADD COLUMN dlq_value_truncated  text,
    ADD COLUMN dlq_value_bytes      text;

-- +goose StatementBegin
CREATE FUNCTION outbox_cdc() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.event_id             := NEW.headers->>'event_id';
    NEW.event_type           := NEW.headers->>'event_type';
    NEW.traceparent          := NEW.headers->>'traceparent';
    NEW.dlq_reason           := NEW.headers->>'dlq_reason';
    NEW.dlq_reason_base64    := NEW.headers->>'dlq_reason_base64';
    NEW.dlq_origin_topic     := NEW.headers->>'dlq_origin_topic';
    NEW.dlq_origin_partition := NEW.headers->>'dlq_origin_partition';
    NEW.dlq_origin_offset    := NEW.headers->>'dlq_origin_offset';
    NEW.dlq_consumer_group   := NEW.headers->>'dlq_consumer_group';
    NEW.dlq_failed_at        := NEW.headers->>'dlq_failed_at';
    NEW.dlq_value_truncated  := NEW.headers->>'dlq_value_truncated';
    NEW.dlq_value_bytes      := NEW.headers->>'dlq_value_bytes';
    NEW.sent_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- Debezium's heartbeat writes here (heartbeat.action.query): a change it
-- decodes in an otherwise idle database, so its slot's position moves on
-- and the WAL behind it can go.
CREATE TABLE outbox_heartbeat (
    id int         PRIMARY KEY CHECK (id = 1),
    at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE outbox_heartbeat;
DROP TRIGGER IF EXISTS outbox_cdc ON outbox;
DROP FUNCTION outbox_cdc();
ALTER TABLE outbox DROP COLUMN event_id, DROP COLUMN event_type, DROP COLUMN traceparent, DROP COLUMN dlq_reason, DROP COLUMN dlq_reason_base64, DROP COLUMN dlq_origin_topic, DROP COLUMN dlq_origin_partition, DROP COLUMN dlq_origin_offset, DROP COLUMN dlq_consumer_group, DROP COLUMN dlq_failed_at, DROP COLUMN dlq_value_truncated, DROP COLUMN dlq_value_bytes;
