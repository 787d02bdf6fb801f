-- +goose Up
CREATE TABLE orders (
    id                  uuid        PRIMARY KEY,
    customer_id         text        NOT NULL,
    items               jsonb       NOT NULL,
    -- Computed with overflow checks before insert; the CHECK is the last
    -- line of defence against a wrapped, negative total.
    total_amount        bigint      NOT NULL CHECK (total_amount >= 0),
    currency            text        NOT NULL,
    shipping_address    jsonb       NOT NULL,
    -- CANCELLING: a cancel was accepted (POST /orders/{id}/cancel, or the
    -- deadline) and OrderCancelRequested queued; the participants are
    -- undoing their effects.
    status              text        NOT NULL CHECK (status IN ('PENDING', 'CANCELLING', 'COMPLETED', 'CANCELLED')),
    cancel_reason       text        NOT NULL DEFAULT '',
    -- The client's Idempotency-Key, NULL when it sent none; see
    -- orders_customer_idempotency_key.
    idempotency_key     text,
    -- sha256 of the validated request, to tell a replay from a reused key.
    request_hash        text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    -- When the cancel was accepted; NULL for an order never cancelled that way.
    cancel_requested_at timestamptz,
    -- The participants' acknowledgements of the cancel, each set once by its
    -- event (PaymentCancelled, InventoryCancelled, ShipmentCancelled) under
    -- the order's row lock; the order is CANCELLED in the transaction that
    -- sets the last. Booleans, not a count, so a duplicate acknowledgement is
    -- harmless.
    payment_cancelled   boolean     NOT NULL DEFAULT false,
    inventory_cancelled boolean     NOT NULL DEFAULT false,
    shipment_cancelled  boolean     NOT NULL DEFAULT false
);

-- An Idempotency-Key is the client's, and clients do not coordinate their
-- keys: it deduplicates within one customer's requests only, so the same key
-- from two customers makes two orders. The keyed order's id is derived from
-- (customer_id, key) (domain.IdempotentOrderID), and a replay is found by
-- this index. The unique index, not a SELECT before the INSERT, decides which
-- of two racing requests with one key creates the order: the second INSERT
-- waits for the first to commit, then conflicts. NULLs never conflict.
CREATE UNIQUE INDEX orders_customer_idempotency_key ON orders (customer_id, idempotency_key);

-- GET /orders lists newest first (created_at DESC, id DESC) and seeks past
-- the cursor with (created_at, id) < (…, …). One index per filter
-- combination, each ending in the sort key, so every page is an index range
-- scan of limit+1 rows: no sort, no rows read and thrown away.
CREATE INDEX orders_created ON orders (created_at DESC, id DESC);
CREATE INDEX orders_customer_created ON orders (customer_id, created_at DESC, id DESC);
CREATE INDEX orders_status_created ON orders (status, created_at DESC, id DESC);
CREATE INDEX orders_customer_status_created ON orders (customer_id, status, created_at DESC, id DESC);

-- The deadline's sweep reads the oldest PENDING orders; the index holds only
-- those, so it stays as small as the sagas in flight.
CREATE INDEX orders_pending_created_at ON orders (created_at) WHERE status = 'PENDING';

-- +goose Down
DROP TABLE orders;
