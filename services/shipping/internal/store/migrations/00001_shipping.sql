-- +goose Up
-- One row per order whose reservation shipping has decided on. The primary
-- key makes a second decision for the same order impossible, so a
-- redelivered or repeated InventoryReserved can never announce twice.
CREATE TABLE IF NOT EXISTS shipments (
    order_id   text        PRIMARY KEY,
    status     text        NOT NULL CHECK (status IN ('SCHEDULED', 'FAILED')),
    country    text        NOT NULL,
    reason     text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS shipments;
