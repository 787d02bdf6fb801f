-- +goose Up
-- Messages waiting to be published, written in the same transaction as the
-- state change they announce. txid records the writing transaction so the
-- relay can hold back rows of transactions that might still be running
-- below a later, already visible row (see Relay.Flush).
CREATE TABLE IF NOT EXISTS outbox (
    id         bigserial   PRIMARY KEY,
    txid       xid8        NOT NULL DEFAULT pg_current_xact_id(),
    topic      text        NOT NULL,
    key        bytea,
    value      bytea       NOT NULL,
    headers    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (txid, id) WHERE sent_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_sent_at ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- +goose Down
DROP TABLE IF EXISTS outbox;
