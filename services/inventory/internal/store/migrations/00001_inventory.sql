-- +goose Up
-- Units per SKU. available can be reserved by new orders; reserved is held
-- for paid orders. The CHECKs are the last line of defence: no code path can
-- reserve units that are not there or return more than was held.
CREATE TABLE IF NOT EXISTS stock (
    sku        text        PRIMARY KEY,
    available  bigint      NOT NULL CHECK (available >= 0),
    reserved   bigint      NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per order ever reserved, rejected or released. The primary key
-- makes a second reservation of the same order impossible.
CREATE TABLE IF NOT EXISTS reservations (
    order_id   text        PRIMARY KEY,
    status     text        NOT NULL CHECK (status IN ('RESERVED', 'REJECTED', 'RELEASED')),
    items      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    detail     text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS reservations;
DROP TABLE IF EXISTS stock;
