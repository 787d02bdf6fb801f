-- +goose Up
CREATE TABLE IF NOT EXISTS orders (
    id               uuid        PRIMARY KEY,
    customer_id      text        NOT NULL,
    items            jsonb       NOT NULL,
    -- Computed with overflow checks before insert; the CHECK is the last
    -- line of defence against a wrapped, negative total.
    total_amount     bigint      NOT NULL CHECK (total_amount >= 0),
    currency         text        NOT NULL,
    shipping_address jsonb       NOT NULL,
    status           text        NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'CANCELLED')),
    cancel_reason    text        NOT NULL DEFAULT '',
    -- The client's Idempotency-Key, NULL when it sent none. The unique
    -- index, not a SELECT before the INSERT, decides which of two racing
    -- requests with one key creates the order: the second INSERT waits for
    -- the first to commit, then conflicts. NULLs never conflict.
    idempotency_key  text        UNIQUE,
    -- sha256 of the validated request, to tell a replay from a reused key.
    request_hash     text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS orders;
