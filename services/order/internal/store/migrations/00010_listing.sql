-- +goose Up
-- An Idempotency-Key is the client's, and clients do not coordinate their
-- keys: it deduplicates within one customer's requests only, so the same
-- key from two customers makes two orders. The keyed order's id is derived
-- from (customer_id, key) (domain.IdempotentOrderID), and a replay is found
-- by this index: orders created before the change, under a random id, are
-- still found by their key.
ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_idempotency_key_key;
CREATE UNIQUE INDEX IF NOT EXISTS orders_customer_idempotency_key ON orders (customer_id, idempotency_key);

-- GET /orders lists newest first (created_at DESC, id DESC) and seeks past
-- the cursor with (created_at, id) < (…, …). One index per filter
-- combination, each ending in the sort key, so every page is an index
-- range scan of limit+1 rows: no sort, no rows read and thrown away.
CREATE INDEX IF NOT EXISTS orders_created ON orders (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS orders_customer_created ON orders (customer_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS orders_status_created ON orders (status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS orders_customer_status_created ON orders (customer_id, status, created_at DESC, id DESC);

-- +goose Down
DROP INDEX IF EXISTS orders_customer_status_created;
DROP INDEX IF EXISTS orders_status_created;
DROP INDEX IF EXISTS orders_customer_created;
DROP INDEX IF EXISTS orders_created;
DROP INDEX IF EXISTS orders_customer_idempotency_key;
ALTER TABLE orders ADD CONSTRAINT orders_idempotency_key_key UNIQUE (idempotency_key);
