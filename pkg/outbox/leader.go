// This file holds the relay's leadership: one relay per database publishes,
// elected by a session-level advisory lock held on a connection of its own.

package outbox

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// relayLockID is the advisory lock that elects the active relay. It is
// combined with the outbox table's oid, so that relays of two outbox tables
// in one database (tests give each its own schema) do not exclude each
// other, while every replica of a service agrees on the key.
const relayLockID = 0x6f7574626f78 // "outbox"

// lead returns the leader's connection, electing this relay if no other
// leads, or nil if another does. A leader checks its connection every round:
// if it died, so did the lock, and another relay may already lead.
func (r *Relay) lead(ctx context.Context) (*sqlx.Conn, error) {
	if r.conn != nil {
		pctx, cancel := context.WithTimeout(ctx, statementTimeout)
		err := r.conn.PingContext(pctx)
		cancel()
		if err == nil {
			return r.conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.log.Warn("lost the leader connection; electing again", "err", err)
		r.resign()
	}
	conn, err := r.cfg.DB.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: connect: %w", err)
	}
	var won bool
	if err := conn.GetContext(ctx, &won,
		`SELECT pg_try_advisory_lock($1 # 'outbox'::regclass::oid::bigint)`, relayLockID); err != nil {
		discard(conn) // it may hold the lock after all
		return nil, fmt.Errorf("outbox: elect: %w", err)
	}
	if !won {
		conn.Close()
		return nil, nil
	}
	r.conn = conn
	r.leading.Store(true)
	r.log.Info("elected the active relay")
	return conn, nil
}

// resign gives up the leadership, if held, by ending the session: the
// server then releases the lock, and no pooled connection ever carries it.
func (r *Relay) resign() {
	if r.conn == nil {
		return
	}
	discard(r.conn)
	r.conn = nil
	r.leading.Store(false)
	clear(r.unknownSince)
	r.log.Info("resigned as the active relay")
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sqlx.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // ErrBadConn is the point
	conn.Close()
}

// Close gives up the leadership that Flush took, so that another relay can
// take over at once. Run gives it up on its own when it returns.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resign()
	return nil
}
