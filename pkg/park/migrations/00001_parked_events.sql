-- +goose Up
-- Per-key parking. When an event of order X fails permanently, X is parked:
-- the failed message is kept here with its reason, and every later event of
-- X this consumer receives is kept here too, in order (seq), instead of
-- being applied — while every other order keeps flowing. An operator
-- replays the rows of X once the cause is fixed, or releases them
-- (choreoctl); either resolves them, and X flows again.
--
-- A message with no key (nothing to park by) is kept too, with park_key
-- NULL: a dead letter that holds nothing up.
CREATE TABLE parked_events (
    seq         bigserial   PRIMARY KEY,
    consumer    text        NOT NULL,  -- the service (consumer group) that parked it
    park_key    text,                  -- the Kafka key: the order id
    event_id    text,                  -- the envelope's id, when the message decoded
    event_type  text,
    topic       text        NOT NULL,
    "partition" integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    msg_key     bytea,
    value       bytea       NOT NULL,
    headers     jsonb       NOT NULL DEFAULT '{}',
    reason      text,                  -- why it failed; NULL for an event held behind a failure
    parked_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    resolution  text CHECK (resolution IN ('replayed', 'released'))
);

-- A redelivered message is kept once. Its content is part of the key: an
-- offset is reused when a topic is deleted and created again, and a
-- different message there must be kept too.
CREATE UNIQUE INDEX parked_events_origin
    ON parked_events (consumer, topic, "partition", "offset", md5(value));

-- What every batch asks: is any of these keys parked? Only unresolved rows,
-- so the index stays as small as what is parked now.
CREATE INDEX parked_events_open ON parked_events (consumer, park_key, seq)
    WHERE resolved_at IS NULL;

-- +goose Down
DROP TABLE parked_events;
