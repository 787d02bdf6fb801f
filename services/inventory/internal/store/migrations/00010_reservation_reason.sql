-- +goose Up
-- GET /reservations/{order_id} answers why a reservation is REJECTED or
-- RELEASED, as a reason code (detail keeps the text for people: the
-- shortages, or that a release overtook its reserve), and when it was
-- released — kept apart from updated_at, which any later change moves.
ALTER TABLE reservations ADD COLUMN IF NOT EXISTS reason text NOT NULL DEFAULT '';
ALTER TABLE reservations ADD COLUMN IF NOT EXISTS released_at timestamptz;
-- The rows before: what domain.Reason decides for each.
UPDATE reservations SET reason = 'out_of_stock' WHERE status = 'REJECTED' AND reason = '';
UPDATE reservations SET reason = regexp_replace(detail, '^release arrived before reserve: ', ''),
                        released_at = coalesce(released_at, updated_at)
WHERE status = 'RELEASED';

-- +goose Down
ALTER TABLE reservations DROP COLUMN IF EXISTS released_at;
ALTER TABLE reservations DROP COLUMN IF EXISTS reason;
