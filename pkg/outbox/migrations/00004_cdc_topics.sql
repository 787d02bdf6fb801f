-- +goose Up
-- outbox_cdc() also refuses a row for a topic the service's connector may
-- not write: its arguments after the size limit are the topics its Kafka
-- user's ACLs allow (outbox.StartConfig.Topics). The worker's producer
-- would fail on any other topic, or on a name Kafka never accepts, and the
-- task with it on every restart, stalling every later event; refused, the
-- row is left out of the publication, as the built-in relay refuses such
-- rows (refused.go). A trigger created with the size limit alone (before
-- this version) checks the size only.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_cdc() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    size    bigint;
    allowed text[];
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
    NEW.cdc := true;
    IF TG_NARGS > 1 THEN
        allowed := TG_ARGV[1:TG_NARGS - 1]; -- TG_ARGV counts from 0
        IF NEW.topic !~ '^[a-zA-Z0-9._-]{1,249}$' OR NEW.topic IN ('.', '..') THEN
            NEW.refused_at := now();
            NEW.last_error := format('"%s" is not a legal Kafka topic name', NEW.topic);
            RETURN NEW;
        END IF;
        IF NOT NEW.topic = ANY (allowed) THEN
            NEW.refused_at := now();
            NEW.last_error := format('topic "%s" is not one this service''s Debezium connector may write (%s): its Kafka user may write only those',
                NEW.topic, array_to_string(allowed, ', '));
            RETURN NEW;
        END IF;
    END IF;
    IF TG_NARGS > 0 THEN
        size := coalesce(octet_length(NEW.key), 0) + octet_length(NEW.value)
            + (SELECT coalesce(sum(octet_length(h.key) + octet_length(h.value)), 0) FROM jsonb_each_text(NEW.headers) AS h);
        IF size > TG_ARGV[0]::bigint THEN
            NEW.refused_at := now();
            NEW.last_error := format('too large for Kafka: %s bytes of key, value and headers, over the %s the Connect worker''s producer sends (max.request.size)', size, TG_ARGV[0]);
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_cdc() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    size bigint;
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
    NEW.cdc := true;
    IF TG_NARGS > 0 THEN
        size := coalesce(octet_length(NEW.key), 0) + octet_length(NEW.value)
            + (SELECT coalesce(sum(octet_length(h.key) + octet_length(h.value)), 0) FROM jsonb_each_text(NEW.headers) AS h);
        IF size > TG_ARGV[0]::bigint THEN
            NEW.refused_at := now();
            NEW.last_error := format('too large for Kafka: %s bytes of key, value and headers, over the %s the Connect worker''s producer sends (max.request.size)', size, TG_ARGV[0]);
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
