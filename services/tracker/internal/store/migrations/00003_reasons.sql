-- +goose Up
-- The reason an event's payload gives, and the one its saga ended (or is
-- turning back) for, so the page and lists say why without the payloads.
-- Sagas recorded before this read '' until their next event recomputes them.
-- A constant default adds the columns without rewriting the tables; the
-- brief exclusive lock still queues behind open writers, so give up after a
-- few seconds (the tracker fails to start and tries again) rather than stall.
SET LOCAL lock_timeout = '5s';
ALTER TABLE tracked_events ADD COLUMN IF NOT EXISTS reason text NOT NULL DEFAULT '';
ALTER TABLE sagas ADD COLUMN IF NOT EXISTS reason text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sagas DROP COLUMN IF EXISTS reason;
ALTER TABLE tracked_events DROP COLUMN IF EXISTS reason;
