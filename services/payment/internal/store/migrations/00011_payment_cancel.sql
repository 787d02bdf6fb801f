-- +goose Up
-- When the order's cancel (OrderCancelRequested) was handled: the refund or
-- tombstone it led to and its acknowledgement (PaymentCancelled) were
-- committed then. NULL while the order was not cancelled. A second cancel
-- request for the order finds it set and changes nothing, so each order is
-- acknowledged once.
ALTER TABLE payments ADD COLUMN IF NOT EXISTS cancelled_at timestamptz;

-- +goose Down
ALTER TABLE payments DROP COLUMN IF EXISTS cancelled_at;
