-- +goose Up
-- GET /payments/{order_id} answers why a payment is DECLINED or REFUNDED
-- (detail, as reason) and when it was refunded. The refund's time is kept
-- apart from updated_at, which any later change of the row moves.
ALTER TABLE payments ADD COLUMN IF NOT EXISTS refunded_at timestamptz;
UPDATE payments SET refunded_at = updated_at WHERE status = 'REFUNDED' AND refunded_at IS NULL;

-- +goose Down
ALTER TABLE payments DROP COLUMN IF EXISTS refunded_at;
