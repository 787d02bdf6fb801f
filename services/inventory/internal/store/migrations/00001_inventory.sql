-- +goose Up
-- Units per SKU. available can be reserved by new orders; reserved is held
-- for paid orders. The CHECKs are the last line of defence: no code path can
-- reserve units that are not there or return more than was held.
CREATE TABLE stock (
    sku        text        PRIMARY KEY,
    available  bigint      NOT NULL CHECK (available >= 0),
    reserved   bigint      NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Raised by every change of the row (stock_next_version). GET
    -- /stock/{sku} answers it as the ETag, and a PUT that replaces the
    -- available units must name it in If-Match, so a release committed
    -- between an operator's read and write is never erased.
    version    bigint      NOT NULL DEFAULT 1
);

-- The version is raised by a trigger so that every change counts, whoever
-- makes it: a saga's reserve or release, an operator's restock or PUT, an
-- UPDATE typed by hand.
-- +goose StatementBegin
CREATE FUNCTION stock_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER stock_next_version BEFORE UPDATE ON stock
    FOR EACH ROW EXECUTE FUNCTION stock_next_version();

-- One row per order ever reserved, rejected or released. The primary key
-- makes a second reservation of the same order impossible.
CREATE TABLE reservations (
    order_id     text        PRIMARY KEY,
    status       text        NOT NULL CHECK (status IN ('RESERVED', 'REJECTED', 'RELEASED')),
    items        jsonb       NOT NULL DEFAULT '[]'::jsonb,
    -- The text for people: the shortages, or that a release overtook its
    -- reserve.
    detail       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- Why a reservation is REJECTED or RELEASED, as a reason code, answered
    -- by GET /reservations/{order_id}.
    reason       text        NOT NULL DEFAULT '',
    -- When it was released, kept apart from updated_at, which any later
    -- change moves.
    released_at  timestamptz,
    -- When the order's cancel (OrderCancelRequested) was handled: the release
    -- or tombstone it led to and its acknowledgement (InventoryCancelled) were
    -- committed then. NULL while the order was not cancelled. A second cancel
    -- request finds it set and changes nothing, so each order is
    -- acknowledged once.
    cancelled_at timestamptz
);

-- The restocks sent with an Idempotency-Key (pg.Once): a restock commutes with
-- the saga's writes, so neither the amount nor the version can tell a retry
-- from a second restock; the key can. scope is the SKU; the
-- request_hash is the quantity sent, so the same key with another one is
-- refused; response is the first answer (gob), which a retry gets back.
CREATE TABLE restock_requests (
    scope           text        NOT NULL,
    idempotency_key text        NOT NULL,
    request_hash    text        NOT NULL,
    response        bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, idempotency_key)
);

-- pg.ForgetOnceKeys deletes the keys older than a week by created_at.
CREATE INDEX restock_requests_created_at ON restock_requests (created_at);

-- +goose Down
DROP TABLE restock_requests;
DROP TABLE reservations;
DROP TABLE stock;
DROP FUNCTION stock_next_version();
