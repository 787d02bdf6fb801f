-- +goose Up
-- One row per event a consumer has applied. The primary key is the whole
-- idempotency guarantee: a second insert of the same (consumer, event_id)
-- conflicts, even when both transactions race.
CREATE TABLE IF NOT EXISTS processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE IF EXISTS processed_events;
