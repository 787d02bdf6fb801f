-- +goose Up
-- An account holds one currency; a charge in another is declined rather
-- than debiting yen for dollars.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS currency text NOT NULL DEFAULT 'JPY';

-- +goose Down
ALTER TABLE accounts DROP COLUMN IF EXISTS currency;
