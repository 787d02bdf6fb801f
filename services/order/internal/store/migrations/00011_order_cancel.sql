-- +goose Up
-- CANCELLING: a cancel was accepted (POST /orders/{id}/cancel, or the
-- deadline) and OrderCancelRequested queued; the participants are undoing
-- their effects.
ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING', 'CANCELLING', 'COMPLETED', 'CANCELLED'));

-- When the cancel was accepted; NULL for an order never cancelled that way.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS cancel_requested_at timestamptz;

-- The participants' acknowledgements of the cancel, each set once by its
-- event (PaymentCancelled, InventoryCancelled, ShipmentCancelled) under the
-- order's row lock; the order is CANCELLED in the transaction that sets the
-- last. Booleans, not a count, so a duplicate acknowledgement is harmless.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS payment_cancelled   boolean NOT NULL DEFAULT false;
ALTER TABLE orders ADD COLUMN IF NOT EXISTS inventory_cancelled boolean NOT NULL DEFAULT false;
ALTER TABLE orders ADD COLUMN IF NOT EXISTS shipment_cancelled  boolean NOT NULL DEFAULT false;

-- The deadline's sweep reads the oldest PENDING orders; the index holds
-- only those, so it stays as small as the sagas in flight.
CREATE INDEX IF NOT EXISTS orders_pending_created_at ON orders (created_at) WHERE status = 'PENDING';

-- +goose Down
DROP INDEX IF EXISTS orders_pending_created_at;
ALTER TABLE orders DROP COLUMN IF EXISTS shipment_cancelled;
ALTER TABLE orders DROP COLUMN IF EXISTS inventory_cancelled;
ALTER TABLE orders DROP COLUMN IF EXISTS payment_cancelled;
ALTER TABLE orders DROP COLUMN IF EXISTS cancel_requested_at;
UPDATE orders SET status = 'PENDING' WHERE status = 'CANCELLING';
ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('PENDING', 'COMPLETED', 'CANCELLED'));
