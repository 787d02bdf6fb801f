-- +goose Up
CREATE TABLE accounts (
    customer_id text        PRIMARY KEY,
    -- The CHECK is the last line of defence: no code path can overdraw.
    balance     bigint      NOT NULL CHECK (balance >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- An account holds one currency; a charge in another is declined rather
    -- than debiting yen for dollars.
    currency    text        NOT NULL DEFAULT 'JPY',
    -- Raised by every change of the row (accounts_next_version). GET
    -- /accounts/{customer_id} answers it as the ETag, and a PUT that replaces
    -- the balance must name it in If-Match, so a refund committed between an
    -- operator's read and write is never erased.
    version     bigint      NOT NULL DEFAULT 1
);

-- The version is raised by a trigger so that every change counts, whoever
-- makes it: a saga's debit or refund, an operator's deposit or PUT, an
-- UPDATE typed by hand.
-- +goose StatementBegin
CREATE FUNCTION accounts_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER accounts_next_version BEFORE UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION accounts_next_version();

-- One row per order ever charged, declined or refunded. The primary key
-- makes a second charge of the same order impossible.
CREATE TABLE payments (
    order_id     text        PRIMARY KEY,
    customer_id  text        NOT NULL,
    amount       bigint      NOT NULL CHECK (amount >= 0),
    currency     text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('COMPLETED', 'DECLINED', 'REFUNDED')),
    -- Why a payment is DECLINED or REFUNDED, answered by GET
    -- /payments/{order_id} as reason.
    detail       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- When it was refunded, kept apart from updated_at, which any later
    -- change of the row moves.
    refunded_at  timestamptz,
    -- When the order's cancel (OrderCancelRequested) was handled: the refund
    -- or tombstone it led to and its acknowledgement (PaymentCancelled) were
    -- committed then. NULL while the order was not cancelled. A second cancel
    -- request finds it set and changes nothing, so each order is
    -- acknowledged once.
    cancelled_at timestamptz
);

-- The deposits sent with an Idempotency-Key (pg.Once): a deposit commutes with
-- the saga's writes, so neither the amount nor the version can tell a retry
-- from a second deposit; the key can. scope is the customer_id; the
-- request_hash is the amount sent, so the same key with another one is
-- refused; response is the first answer (gob), which a retry gets back.
CREATE TABLE deposit_requests (
    scope           text        NOT NULL,
    idempotency_key text        NOT NULL,
    request_hash    text        NOT NULL,
    response        bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, idempotency_key)
);

-- pg.ForgetOnceKeys deletes the keys older than a week by created_at.
CREATE INDEX deposit_requests_created_at ON deposit_requests (created_at);

-- +goose Down
DROP TABLE deposit_requests;
DROP TABLE payments;
DROP TABLE accounts;
DROP FUNCTION accounts_next_version();
