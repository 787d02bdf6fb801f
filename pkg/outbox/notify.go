// This file holds the relay's wake-ups: LISTEN for the NOTIFY that Add
// sends on commit, and skipping that NOTIFY while the leader is awake. A
// notifying commit takes a lock that is one for the whole cluster through
// its WAL flush, so under load every notifying commit waits for the one
// before it. TestAddNotifiesUnlessTheRelayIsAwake and TestNoRowWaitsForThePoll
// show why each half exists.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Channel is the PostgreSQL NOTIFY channel Add signals on commit, so the
// relay publishes within milliseconds instead of waiting for its next poll.
const Channel = "outbox"

// Advisory locks, combined with the outbox table's oid as the leader's lock
// is, by which Add and the leader agree on when a NOTIFY is needed:
//   - the leader holds relayAwakeID while it is awake: it publishes, or
//     looks again soon on its own;
//   - Add takes relayWritingID shared until its transaction ends, then
//     notifies unless the leader holds relayAwakeID;
//   - to sleep, the leader lets relayAwakeID go only once it can take
//     relayWritingID alone (no writer that saw it awake still runs), then
//     runs one more round, so no unannounced row is left behind.
const (
	relayAwakeID   = 0x6f7574617765 // "outawe"
	relayWritingID = 0x6f757477726e // "outwrn"
)

// withWakeUp returns insert, a statement that adds rows, followed in the
// same statement (no extra round trip) by the NOTIFY of Channel when no
// relay is awake. CASE evaluates in order: the writing lock is taken
// before the awake one is tested. Any holder of relayAwakeID, or anyone
// waiting for it, reads as awake: only the leader takes it, never blocking.
func withWakeUp(insert string) string {
	lock := func(id int64) string {
		return strconv.FormatInt(id, 10) + "::bigint # 'outbox'::regclass::oid::bigint"
	}
	notify := `pg_notify('` + Channel + `', '')`
	return `WITH added AS (` + insert + `)
	SELECT CASE
		WHEN NOT pg_try_advisory_xact_lock_shared(` + lock(relayWritingID) + `) THEN ` + notify + `
		WHEN pg_try_advisory_lock_shared(` + lock(relayAwakeID) + `) THEN
			CASE WHEN pg_advisory_unlock_shared(` + lock(relayAwakeID) + `) THEN ` + notify + ` END
	END`
}

// writersRetry is how soon Run looks again when it could not sleep
// because writers that saw it awake, and so will not notify, still run;
// the wait doubles, up to writersRetryMax, while they keep coming.
const (
	writersRetry    = 2 * time.Millisecond
	writersRetryMax = 32 * time.Millisecond
)

// dozing is Run's side of the protocol.
type dozing struct {
	asleep  bool    // relayAwakeID let go, no writer that saw it left, and one round since
	writers backoff // the wait while writers that will not notify run
}

// flowing follows a round that moved rows: writers need not notify while
// the relay comes back for more on its own.
func (d *dozing) flowing(ctx context.Context, r *Relay) {
	d.asleep = false
	d.writers.reset()
	if err := r.awaken(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("could not tell writers the relay is awake; they notify", "err", err)
	}
}

// idle follows a round with nothing more to do. If the leader may sleep, it
// does, and asks for one last round now (the rows of the writers that did
// not notify); while such writers run it asks to look again soon, in
// writersIn.
func (d *dozing) idle(ctx context.Context, r *Relay, leader bool) (writersIn time.Duration, now bool) {
	if !leader || d.asleep {
		return 0, false
	}
	if alone, err := r.doze(ctx); err == nil && alone {
		d.asleep = true
		d.writers.reset()
		return 0, true
	}
	return d.writers.take(writersRetry, writersRetryMax), false // or resigned: look again soon
}

// awaken takes relayAwakeID on the leader's connection, if it leads and
// does not hold it yet: from then on, Add does not notify. It does not
// wait: if a writer holds it just then, writers go on notifying, which is
// slower but correct, and the next round that publishes tries again.
func (r *Relay) awaken(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil || r.awake {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	if err := r.conn.GetContext(ctx, &r.awake, `SELECT pg_try_advisory_lock($1::bigint # 'outbox'::regclass::oid::bigint)`, relayAwakeID); err != nil {
		// It may have taken the lock before it failed; held unknown to the
		// relay, writers would never notify again. End the session.
		r.resign()
		return fmt.Errorf("outbox: take the awake lock: %w", err)
	}
	return nil
}

// doze lets relayAwakeID go, so that Adds notify, if no writer that saw it
// held still runs, and reports whether it did. The test and the letting go
// are one statement: the writing lock is taken first, so a writer arriving
// in between finds it taken and notifies.
func (r *Relay) doze(ctx context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var alone sql.NullBool
	err := r.conn.GetContext(ctx, &alone, `
		SELECT CASE WHEN pg_try_advisory_lock($1::bigint # 'outbox'::regclass::oid::bigint) THEN
			CASE WHEN NOT $3::boolean THEN pg_advisory_unlock($1::bigint # 'outbox'::regclass::oid::bigint)
			     WHEN pg_advisory_unlock($2::bigint # 'outbox'::regclass::oid::bigint) THEN pg_advisory_unlock($1::bigint # 'outbox'::regclass::oid::bigint)
			END
		ELSE false END`, relayWritingID, relayAwakeID, r.awake)
	if err == nil && !alone.Valid {
		err = errors.New("the awake lock was not held")
	}
	if err != nil {
		// Unsure which locks the session holds: end it, which lets go of
		// them all; the next round elects again.
		r.log.Warn("could not go to sleep; resigning", "err", err)
		r.resign()
		return false, fmt.Errorf("outbox: go to sleep: %w", err)
	}
	if alone.Bool {
		r.awake = false
	}
	return alone.Bool, nil
}

// listen starts LISTEN on its own connection and returns the channel it
// signals on every notification. pq.Listener.Listen blocks until it has a
// connection, which may be never while the database is unreachable, so it
// runs apart: polling keeps publishing meanwhile.
func (r *Relay) listen(ctx context.Context, wg *sync.WaitGroup) <-chan struct{} {
	wake := make(chan struct{}, 1)
	listener := pq.NewListener(r.cfg.DatabaseURL, 10*time.Millisecond, 5*time.Second,
		func(ev pq.ListenerEventType, err error) {
			if err != nil {
				r.log.Warn("listen connection event", "event", ev, "err", err)
			}
		})
	wg.Go(func() {
		if err := listener.Listen(Channel); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("listen failed; relying on polling", "err", err)
			}
			return
		}
		observe(r, "listening")
	})
	wg.Go(func() {
		defer listener.Close() // also ends a Listen still waiting to connect
		defer observe(r, "deaf")
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-listener.Notify: // nil after a reconnect: publish anyway
				if !ok {
					return
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	})
	return wake
}

// quietWriters holds relayAwakeID for a service whose outbox Debezium
// publishes: no relay listens, so Add's NOTIFY, which serialises the
// cluster's commits, would be for nobody. Held on a connection of its own
// for as long as the service runs; if that session dies, writers notify
// again until the next hold takes it back. TestDebeziumModeWritersDoNotNotify
// shows it.
type quietWriters struct {
	conn *sqlx.Conn
}

// hold takes relayAwakeID if it does not hold it yet, and checks the
// session that holds it. Another instance holding it does as well.
func (q *quietWriters) hold(ctx context.Context, db *sqlx.DB, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	if q.conn != nil {
		if err := q.conn.PingContext(ctx); err == nil {
			return
		}
		q.release()
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		log.Warn("could not keep writers from notifying", "err", err)
		return
	}
	var held bool
	if err := conn.GetContext(ctx, &held, `SELECT pg_try_advisory_lock($1::bigint # 'outbox'::regclass::oid::bigint)`, relayAwakeID); err != nil || !held {
		discard(conn) // it may hold the lock after all; or another instance does
		return
	}
	q.conn = conn
}

// release lets relayAwakeID go, by ending the session that holds it.
func (q *quietWriters) release() {
	if q.conn != nil {
		discard(q.conn)
		q.conn = nil
	}
}
