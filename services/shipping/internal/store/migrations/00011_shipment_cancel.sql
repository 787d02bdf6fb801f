-- +goose Up
-- The order's cancel (OrderCancelRequested) turns a SCHEDULED shipment
-- CANCELLED, and leaves a CANCELLED tombstone when it comes before the
-- reservation, so a late InventoryReserved schedules nothing.
ALTER TABLE shipments DROP CONSTRAINT IF EXISTS shipments_status_check;
ALTER TABLE shipments ADD CONSTRAINT shipments_status_check
    CHECK (status IN ('SCHEDULED', 'FAILED', 'CANCELLED'));

-- When the cancel was handled: the change it led to and its acknowledgement
-- (ShipmentCancelled) were committed then. NULL while the order was not
-- cancelled. A second cancel request for the order finds it set and changes
-- nothing, so each order is acknowledged once.
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS cancelled_at timestamptz;

-- +goose Down
ALTER TABLE shipments DROP COLUMN IF EXISTS cancelled_at;
DELETE FROM shipments WHERE status = 'CANCELLED';
ALTER TABLE shipments DROP CONSTRAINT IF EXISTS shipments_status_check;
ALTER TABLE shipments ADD CONSTRAINT shipments_status_check
    CHECK (status IN ('SCHEDULED', 'FAILED'));
