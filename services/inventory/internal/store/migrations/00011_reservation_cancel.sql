-- +goose Up
-- When the order's cancel (OrderCancelRequested) was handled: the release or
-- tombstone it led to and its acknowledgement (InventoryCancelled) were
-- committed then. NULL while the order was not cancelled. A second cancel
-- request for the order finds it set and changes nothing, so each order is
-- acknowledged once.
ALTER TABLE reservations ADD COLUMN IF NOT EXISTS cancelled_at timestamptz;

-- +goose Down
ALTER TABLE reservations DROP COLUMN IF EXISTS cancelled_at;
