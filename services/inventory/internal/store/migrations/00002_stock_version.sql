-- +goose Up
-- A version per SKU, raised by every change of its row, whoever makes it: a
-- saga's reserve or release, an operator's restock or PUT, an UPDATE typed
-- by hand (the trigger). GET /stock/{sku} answers it as the ETag, and a PUT
-- that replaces the available units must name it in If-Match, so a release
-- committed between an operator's read and write is never erased.
ALTER TABLE stock ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 1;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stock_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS stock_next_version ON stock;
CREATE TRIGGER stock_next_version BEFORE UPDATE ON stock
    FOR EACH ROW EXECUTE FUNCTION stock_next_version();

-- +goose Down
DROP TRIGGER IF EXISTS stock_next_version ON stock;
DROP FUNCTION IF EXISTS stock_next_version();
ALTER TABLE stock DROP COLUMN IF EXISTS version;
