// This file holds the relay's leadership: one relay per database publishes,
// elected by a session-level advisory lock held on a connection of its own,
// whose session the server ends once it has sat idle for the Lease. Every
// mark goes through that session, so a leader frozen past its Lease marks
// nothing. TestFrozenLeaderIsReplacedWithinLease, TestIdleLeaderKeepsItsLease
// and TestLeaderReelectsAfterConnectionDies show why. (A session lock needs
// a real session: connect directly or through a session-pooling proxy.)

package outbox

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
)

// relayLockID is the advisory lock that elects the active relay. It is
// combined with the outbox table's oid, so that relays of two outbox tables
// in one database (tests give each its own schema) do not exclude each
// other, while every replica of a service agrees on the key.
const relayLockID = 0x6f7574626f78 // "outbox"

// errLostLeadership: the leader's session died under a round — the server
// ended it after Lease idle (the relay was frozen), or the network did.
// Nothing more may be marked through it; the relay resigns.
var errLostLeadership = errors.New("outbox: lost the leader connection")

// lead returns the leader's connection, electing this relay if no other
// leads, or nil if another does. A leader checks its connection every round
// — the heartbeat that keeps its session inside idle_session_timeout — and
// if it died, so did the lock, and another relay may already lead.
func (r *Relay) lead(ctx context.Context) (*sqlx.Conn, error) {
	if r.conn != nil {
		err := r.heartbeat(ctx, r.conn)
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
	// The session gets its lease in the statement that takes the lock, so
	// no moment exists in which it holds the lock without the limit.
	var got struct {
		Lease string `db:"lease"`
		Won   bool   `db:"won"`
	}
	if err := conn.GetContext(ctx, &got, `
		SELECT set_config('idle_session_timeout', $2, false) AS lease,
		       pg_try_advisory_lock($1 # 'outbox'::regclass::oid::bigint) AS won`,
		relayLockID, strconv.FormatInt(r.cfg.Lease.Milliseconds(), 10)); err != nil {
		discard(conn) // it may hold the lock after all
		return nil, fmt.Errorf("outbox: elect: %w", err)
	}
	if !got.Won {
		// Back to the pool, without the lease: pooled sessions may idle.
		if _, err := conn.ExecContext(ctx, `RESET idle_session_timeout`); err != nil {
			discard(conn)
		} else {
			conn.Close()
		}
		return nil, nil
	}
	// Debezium's hand-over holds the lock only while it runs: an instance
	// still on OUTBOX_RELAY=builtin may win it afterwards, and must not
	// publish beside Debezium. Dropping the session drops the lock.
	if debezium, err := DebeziumPublishes(ctx, conn); err != nil || debezium {
		discard(conn)
		if err != nil {
			return nil, fmt.Errorf("outbox: elect: %w", err)
		}
		if time.Since(r.besideDebezium) > time.Minute {
			r.besideDebezium = time.Now()
			r.log.Error("Debezium publishes this outbox, so this built-in relay does not: stop this instance, or every instance on debezium (docs/transactional-outbox.md)")
		}
		return nil, nil
	}
	r.conn = conn
	r.leading.Store(true)
	leaderGauge.WithLabelValues(r.cfg.Name).Set(1)
	r.log.Info("elected the active relay", "lease", r.cfg.Lease)
	return conn, nil
}

// heartbeat touches the leader's session, so that the server does not end
// it for idling, and reports whether it is still alive.
func (r *Relay) heartbeat(ctx context.Context, conn *sqlx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	return conn.PingContext(ctx)
}

// send publishes msgs, touching the leader's session every Lease/3 while
// Kafka takes its time, so that the server does not end it as idle. It
// gives up waiting when ctx ends or the session dies: a relay asked to
// stop is not held while the producer retries, and rows of an abandoned
// send are not marked, so they are published again.
func (r *Relay) send(ctx context.Context, conn *sqlx.Conn, msgs []*sarama.ProducerMessage) (err error) {
	spans := r.startPublishSpans(msgs)
	start := time.Now()
	defer func() {
		publishSeconds.WithLabelValues(r.cfg.Name).Observe(time.Since(start).Seconds())
		endPublishSpans(spans, err)
	}()
	done := make(chan error, 1)
	go func() { done <- r.cfg.Publisher.SendMessages(msgs) }()
	for {
		beat := r.cfg.Clock.NewTimer(r.cfg.Lease / 3)
		select {
		case err := <-done:
			beat.Stop()
			return err
		case <-ctx.Done():
			beat.Stop()
			return ctx.Err()
		case <-beat.C():
			if err := r.heartbeat(ctx, conn); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w while publishing: %w", errLostLeadership, err)
			}
		}
	}
}

// resign gives up the leadership, if held, by ending the session: the
// server then releases the lock, and no pooled connection ever carries it.
func (r *Relay) resign() {
	if r.conn == nil {
		return
	}
	discard(r.conn)
	r.conn = nil
	r.awake = false // the session's locks ended with it
	r.leading.Store(false)
	leaderGauge.WithLabelValues(r.cfg.Name).Set(0)
	clear(r.unknownSince)
	r.blocked.reset()
	r.log.Info("resigned as the active relay")
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sqlx.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // ErrBadConn is the point
	conn.Close()
}

// Close gives up the leadership that PublishOnce took, so that another
// relay can take over at once. Run gives it up on its own when it returns.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resign()
	return nil
}
