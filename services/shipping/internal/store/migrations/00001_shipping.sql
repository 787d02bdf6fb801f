-- +goose Up
-- One row per order whose reservation shipping has decided on. The primary
-- key makes a second decision for the same order impossible, so a
-- redelivered or repeated InventoryReserved can never announce twice.
CREATE TABLE shipments (
    order_id     text        PRIMARY KEY,
    -- The order's cancel (OrderCancelRequested) turns a SCHEDULED shipment
    -- CANCELLED, and leaves a CANCELLED tombstone when it comes before the
    -- reservation, so a late InventoryReserved schedules nothing.
    status       text        NOT NULL CHECK (status IN ('SCHEDULED', 'FAILED', 'CANCELLED')),
    country      text        NOT NULL,
    reason       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- When the cancel was handled: the change it led to and its
    -- acknowledgement (ShipmentCancelled) were committed then. NULL while the
    -- order was not cancelled. A second cancel request finds it set and
    -- changes nothing, so each order is acknowledged once.
    cancelled_at timestamptz
);

-- +goose Down
DROP TABLE shipments;
