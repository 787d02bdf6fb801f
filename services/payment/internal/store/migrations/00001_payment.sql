-- +goose Up
CREATE TABLE IF NOT EXISTS accounts (
    customer_id text        PRIMARY KEY,
    -- The CHECK is the last line of defence: no code path can overdraw.
    balance     bigint      NOT NULL CHECK (balance >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per order ever charged, declined or refunded. The primary key
-- makes a second charge of the same order impossible.
CREATE TABLE IF NOT EXISTS payments (
    order_id    text        PRIMARY KEY,
    customer_id text        NOT NULL,
    amount      bigint      NOT NULL CHECK (amount >= 0),
    currency    text        NOT NULL,
    status      text        NOT NULL CHECK (status IN ('COMPLETED', 'DECLINED', 'REFUNDED')),
    detail      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS payments;
DROP TABLE IF EXISTS accounts;
