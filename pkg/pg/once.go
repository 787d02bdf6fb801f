package pg

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/fault"
)

// Once applies a request at most once per Idempotency-Key, as POST /orders
// does, for writes that commute and so cannot tell a retry from a second
// request by the state they leave (a deposit, a restock). table is the
// service's own, shaped as deposit_requests in payment's baseline
// migration: (scope, idempotency_key) its primary key, request_hash, and
// the answer in gob. The first request runs apply in the transaction that
// records it; a later one with the same hash gets that answer back
// (replayed), one with another hash is a fault.Invalid. Racing requests are
// serialised by the primary key. If apply fails, the key stays free.
func Once[T any](ctx context.Context, db *sqlx.DB, table, scope, key, hash string, apply func(tx *sqlx.Tx) (T, error)) (v T, replayed bool, err error) {
	err = InTx(ctx, db, func(tx *sqlx.Tx) error {
		var zero T
		v, replayed = zero, false // InTx may run this again, from the start
		res, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (scope, idempotency_key, request_hash, response)
			VALUES ($1, $2, $3, '') ON CONFLICT DO NOTHING`, scope, key, hash)
		if err != nil {
			return fmt.Errorf("record idempotency key %q of %s: %w", key, scope, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("record idempotency key %q of %s: %w", key, scope, err)
		} else if n == 1 {
			if v, err = apply(tx); err != nil {
				return err
			}
			// gob, not JSON: it keeps what a JSON answer leaves out, such as
			// the version the ETag is made of.
			var answer bytes.Buffer
			if err := gob.NewEncoder(&answer).Encode(v); err != nil {
				return fmt.Errorf("encode the answer to idempotency key %q of %s: %w", key, scope, err)
			}
			_, err = tx.ExecContext(ctx, `UPDATE `+table+` SET response = $3 WHERE scope = $1 AND idempotency_key = $2`, scope, key, answer.Bytes())
			if err != nil {
				return fmt.Errorf("record the answer to idempotency key %q of %s: %w", key, scope, err)
			}
			return nil
		}
		var first struct {
			Hash     string `db:"request_hash"`
			Response []byte `db:"response"`
		}
		if err := tx.GetContext(ctx, &first, `SELECT request_hash, response FROM `+table+` WHERE scope = $1 AND idempotency_key = $2`, scope, key); err != nil {
			return fmt.Errorf("read idempotency key %q of %s: %w", key, scope, err)
		}
		if first.Hash != hash {
			return fault.Errorf(fault.Invalid, "Idempotency-Key %q was already used for a different request to %s; send a new key for a new request", key, scope)
		}
		if err := gob.NewDecoder(bytes.NewReader(first.Response)).Decode(&v); err != nil {
			return fmt.Errorf("decode the answer to idempotency key %q of %s: %w", key, scope, err)
		}
		replayed = true
		return nil
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	return v, replayed, nil
}
