-- +goose Up
-- Every event the tracker has seen, once. The primary key on event_id is
-- what de-duplicates: a redelivered or re-published event is inserted with
-- ON CONFLICT DO NOTHING and changes nothing. The payload is not kept: the
-- tracker reads every event generically, known type or not.
CREATE TABLE tracked_events (
    event_id    uuid        PRIMARY KEY,
    order_id    text        NOT NULL,
    type        text        NOT NULL,
    source      text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    occurred_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    -- The reason the payload gives, so the page says why without payloads.
    reason      text        NOT NULL DEFAULT ''
);
-- One saga's timeline, already in its order.
CREATE INDEX tracked_events_timeline
    ON tracked_events (order_id, occurred_at, topic, partition, "offset");

-- One row per saga: what its events say (recomputed from all of them on
-- every new event), kept so lists need not read every timeline. "stuck" is
-- not stored: it depends on the clock, and is decided when read.
CREATE TABLE sagas (
    order_id    text        PRIMARY KEY,
    state       text        NOT NULL CHECK (state IN ('running', 'completed', 'cancelled')),
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    waiting_for text        NOT NULL DEFAULT '',
    event_count integer     NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- The reason the saga ended (or is turning back) for.
    reason      text        NOT NULL DEFAULT ''
);
-- Lists go newest first, paged by (started_at, order_id).
CREATE INDEX sagas_newest ON sagas (started_at DESC, order_id DESC);
CREATE INDEX sagas_running ON sagas (started_at DESC, order_id DESC) WHERE state = 'running';

-- Retention (Store.Forget) takes the ended sagas the tracker last saw
-- (updated_at: an event of theirs recorded, a duplicate included) longest
-- ago. This index hands them over in that order, and holds nothing of the
-- running sagas, which are never forgotten.
CREATE INDEX sagas_forgettable ON sagas (updated_at) WHERE state <> 'running';

-- +goose Down
DROP TABLE sagas;
DROP TABLE tracked_events;
