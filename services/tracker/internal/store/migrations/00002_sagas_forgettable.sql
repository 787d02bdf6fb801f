-- +goose Up
-- Retention (Store.Forget) takes the ended sagas the tracker last saw
-- (updated_at: an event of theirs recorded, a duplicate included) longest
-- ago. This index hands them over in that order, and holds nothing of the
-- running sagas, which are never forgotten.
--
-- Built in the migration's transaction, which blocks Record while it reads
-- the sagas table once (a row per saga, not per event). On a large one,
-- build it first by hand, without blocking —
--   CREATE INDEX CONCURRENTLY sagas_forgettable
--     ON sagas (updated_at) WHERE state <> 'running';
-- — and check it is valid (pg_index.indisvalid; drop and build it again if
-- not): this statement finds it there and skips it.
-- The build waits for the SHARE lock behind open writers, and every new
-- writer would queue behind it: give up after a few seconds instead (the
-- tracker fails to start and tries again) rather than stall them all.
SET LOCAL lock_timeout = '5s';
CREATE INDEX IF NOT EXISTS sagas_forgettable
    ON sagas (updated_at) WHERE state <> 'running';

-- +goose Down
DROP INDEX IF EXISTS sagas_forgettable;
