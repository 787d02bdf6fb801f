-- +goose Up
-- A version per account, raised by every change of its row, whoever makes
-- it: a saga's debit or refund, an operator's deposit or PUT, an UPDATE
-- typed by hand (the trigger). GET /accounts/{customer_id} answers it as the
-- ETag, and a PUT that replaces the balance must name it in If-Match, so a
-- refund committed between an operator's read and write is never erased.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 1;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION accounts_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS accounts_next_version ON accounts;
CREATE TRIGGER accounts_next_version BEFORE UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION accounts_next_version();

-- +goose Down
DROP TRIGGER IF EXISTS accounts_next_version ON accounts;
DROP FUNCTION IF EXISTS accounts_next_version();
ALTER TABLE accounts DROP COLUMN IF EXISTS version;
