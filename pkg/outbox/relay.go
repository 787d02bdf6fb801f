// This file holds the relay's loop: its configuration, Run with its
// wake-ups (LISTEN/NOTIFY, the poll, the held-back retry, the failure
// backoff), and the housekeeping timers for cleanup and the backlog gauge.

package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/failpoint"
)

// Metrics, labelled by the service the relay publishes for (its Name).
// The ones to alert on: the oldest unsent row's age — it grows while Kafka
// is unreachable, and events wait — and parked rows above zero, since each
// waits for a human.
var (
	published = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_published_total",
		Help: "Outbox rows published to Kafka and marked sent.",
	}, []string{"service"})
	publishFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_publish_failures_total",
		Help: "Relay rounds that failed and will be retried.",
	}, []string{"service"})
	parked = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_outbox_parked_total",
		Help: "Outbox rows this process parked: Kafka will never accept them, so they are set aside instead of retried.",
	}, []string{"service"})
	// parkedRows is counted from the table, so it survives restarts and
	// falls when an operator releases a row; the counter above does neither.
	parkedRows = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_parked_rows",
		Help: "Outbox rows parked and not yet released by an operator, counted from the table.",
	}, []string{"service"})
	oldestUnsent = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_oldest_unsent_seconds",
		Help: "Age of the oldest outbox row neither published nor parked, 0 when none waits.",
	}, []string{"service"})
	leaderGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_outbox_leader",
		Help: "1 while this instance's relay holds the leader lock and publishes, 0 while it stands by.",
	}, []string{"service"})
	// publishSeconds times one batch from the send to Kafka's answer
	// (acks=all: every in-sync replica has it), failed batches included.
	publishSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "choreo_outbox_publish_duration_seconds",
		Help:    "Time to publish one batch of outbox rows to Kafka (acks=all), one observation per batch.",
		Buckets: prometheus.DefBuckets,
	}, []string{"service"})
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Name labels the relay's metrics and logs, e.g. the service name.
	Name string
	// DB is the service's database, holding the outbox table. The active
	// relay keeps one of its connections for as long as it leads.
	DB *sqlx.DB
	// DatabaseURL is used to LISTEN for new rows on a dedicated connection.
	DatabaseURL string
	// Publisher sends batches to Kafka.
	Publisher Publisher
	// Logger receives one line per published batch and every failure.
	Logger *slog.Logger
	// BatchSize caps the rows published per round trip. Default 1024: a
	// round costs a few statements and one produce request whatever its
	// size, and drains a backlog about 1.5 times as fast as with 256;
	// sarama splits a batch that would exceed its request limits.
	BatchSize int
	// PollInterval is the safety-net poll for notifications that were
	// missed, e.g. while the LISTEN connection was reconnecting, and how
	// soon a standby relay notices that the active one is gone. Run waits
	// at most min(PollInterval, Lease/3) between rounds. Default 2s.
	PollInterval time.Duration
	// Lease bounds how long a leader that stopped running — frozen
	// (SIGSTOP, a paused container or VM) or cut off — keeps the
	// leadership: its session runs with idle_session_timeout = Lease, so
	// the server ends it, and releases the lock, once it has sat idle that
	// long. A live leader touches its session at least every Lease/3 (each
	// round pings it; a publish that takes long pings it meanwhile), so it
	// never comes near. A frozen leader is replaced within Lease plus one
	// standby round: Lease + min(PollInterval, Lease/3). Default 8s; at
	// least 1s. Flush users must call Flush at least every Lease to lead
	// without interruption.
	Lease time.Duration
	// Retention is how long sent rows are kept for inspection before they
	// are deleted. Default 1h.
	Retention time.Duration
	// Clock is the time the relay reads and waits on: its poll, the retry of
	// held-back rows, the failure backoff, the grace period of unknown
	// topics, and the cleanup and backlog-gauge timers. Default: the system
	// clock. Tests pass a fake one and move it by hand. (Statement timeouts,
	// and the ages the database computes with now(), stay on real time.)
	Clock Clock
}

// Clock is the source of time of a Relay.
type Clock interface {
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d
	// has passed, as time.NewTimer does.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Relay uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing, as (*time.Timer).Stop does.
	Stop() bool
}

// systemClock is the default Clock: package time.
type systemClock struct{}

func (systemClock) Now() time.Time                 { return time.Now() }
func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.Timer.C }

func (c *RelayConfig) setDefaults() {
	if c.BatchSize <= 0 {
		c.BatchSize = 1024
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
}

// Validate reports a missing dependency.
func (c RelayConfig) Validate() error {
	switch {
	case c.DB == nil:
		return errors.New("outbox: RelayConfig.DB is nil")
	case c.DatabaseURL == "":
		return errors.New("outbox: RelayConfig.DatabaseURL is empty")
	case c.Publisher == nil:
		return errors.New("outbox: RelayConfig.Publisher is nil")
	case c.Lease > 0 && c.Lease < time.Second:
		return fmt.Errorf("outbox: RelayConfig.Lease %v is below 1s", c.Lease)
	}
	return nil
}

// Relay publishes outbox rows to Kafka and marks them sent.
//
// One relay per database publishes at a time. It is elected by a
// session-level advisory lock, held on a connection of its own for as long
// as it leads; the other replicas stand by and take over within a
// PollInterval (sooner on a NOTIFY) once the leader's session ends. That
// session runs with idle_session_timeout = Lease and the leader touches it
// at least every Lease/3, so a leader that freezes loses it, and the lock,
// within Lease: worst-case takeover is Lease + min(PollInterval, Lease/3),
// 10 s by default. A leader that wakes after that finds its connection
// dead: it marks nothing (every mark goes through that connection) and
// resigns; whatever it published meanwhile is a duplicate consumers skip. The lock
// lives in the session, not in a transaction, so no transaction stays open
// while Kafka is slow or down: each round selects a batch, publishes it, and
// marks what Kafka acknowledged in a short statement of its own. (A session
// lock needs a real session: connect directly or through a session-pooling
// proxy, not a transaction-pooling one.)
//
// Guarantees:
//   - at least once: a row is marked sent only after Kafka acknowledged it;
//     a crash or a lost connection in between publishes it again, and
//     consumers drop the duplicate by event id. The same holds for the one
//     round a leader whose session died may still finish while its
//     successor starts;
//   - no skipped rows: a round reads only rows whose writing transaction is
//     older than every transaction still running (txid below the snapshot's
//     xmin), so a row that commits late, after a higher id was already
//     visible, is held back rather than overtaken, and never passed by;
//   - order: rows go out in (txid, id) order, and the producer is idempotent
//     with one request in flight (package broker), so Kafka keeps each
//     partition's messages — one order's events share a key, hence a
//     partition — in the order sent, retries included. A non-retriable
//     failure of one row leaves later rows of that order published ahead of
//     it; consumers are built to tolerate that (terminal states, tombstones);
//   - per-key progress: a row that fails for a reason that may pass blocks
//     its key (topic and message key; an unkeyed row only itself): later
//     rows of that key are held back, while later rounds select the rows of
//     every other key, so one unavailable partition or topic does not stop
//     the others. A blocked key's oldest row is retried on a backoff; once
//     Kafka takes it, the key's other rows follow, in order;
//   - nothing stalls behind a poison row: a row Kafka will never accept (too
//     large, invalid, for an invalid topic, or for a topic that has stayed
//     unknown for five minutes) is parked — parked_at and last_error
//     are set, it is logged at ERROR and counted in
//     choreo_outbox_parked_total — and kept, unpublished, until an operator
//     releases it (UPDATE outbox SET parked_at = NULL WHERE id = ...). Other
//     failures are retried with backoff, but never after a round that made
//     progress.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger

	leading   atomic.Bool  // whether conn holds the lock, for housekeeping
	listening atomic.Bool  // whether LISTEN is active, for tests
	waits     atomic.Int64 // times Run went to wait for a wake-up, for tests
	retries   atomic.Int64 // rounds started by the held-back retry timer, for tests

	hook atomic.Pointer[func(point string)] // tests: runs at every failpoint

	mu           sync.Mutex // serialises rounds; guards the fields below
	conn         *sqlx.Conn // holds the leader lock while non-nil
	unknownSince map[string]time.Time
	blocked      map[blockKey]struct{} // keys held back after a failure
	probeAt      time.Time             // when blocked keys are retried
	probeDelay   time.Duration         // the current wait between retries
	awake        bool                  // conn holds relayAwakeID: Add does not notify
}

// NewRelay returns a Relay, or an error if cfg is incomplete.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "outbox-relay")
	if cfg.Name != "" {
		log = log.With("relay", cfg.Name)
	}
	leaderGauge.WithLabelValues(cfg.Name).Set(0)
	return &Relay{
		cfg:          cfg,
		log:          log,
		unknownSince: map[string]time.Time{},
		blocked:      map[blockKey]struct{}{},
		probeDelay:   probeFirst,
	}, nil
}

const (
	// DefaultLease is RelayConfig.Lease's default.
	DefaultLease = 8 * time.Second

	// heldBackRetry is how soon Run first looks again at rows a round had
	// to hold back; the wait doubles, up to PollInterval, while they stay.
	heldBackRetry = 10 * time.Millisecond

	// writersRetry is how soon Run looks again when it could not sleep
	// because transactions that saw it awake, and so will not notify, are
	// still running; the wait doubles, up to writersRetryMax, while they
	// keep coming and their rows do not.
	writersRetry    = 2 * time.Millisecond
	writersRetryMax = 32 * time.Millisecond

	// gaugeEvery is how often the backlog gauge is refreshed.
	gaugeEvery = time.Second

	// statementTimeout bounds the relay's own short statements.
	statementTimeout = 10 * time.Second
)

// Run publishes until ctx ends. It wakes on every committed Add (LISTEN/
// NOTIFY) and at least every PollInterval; while it leads, it also wakes to
// retry rows held back behind a running transaction. Failures are logged and
// retried with backoff; Run returns only when ctx ends — promptly, even if a
// publish is still in flight (its rows are published again by the next
// leader) — and gives up the leadership on its way out.
func (r *Relay) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		r.mu.Lock()
		r.resign()
		r.mu.Unlock()
	}()

	wake := r.listen(ctx, &wg)
	wg.Go(func() { r.housekeep(ctx) })

	// The leader's heartbeat and a standby's bid for the lock: a round at
	// least this often, whatever else wakes Run.
	tick := r.tick()
	poll := r.cfg.Clock.NewTimer(tick) // armed again as it fires, like a ticker
	defer func() { poll.Stop() }()
	failures := 0
	heldDelay := heldBackRetry
	writersDelay := writersRetry
	// asleep: the leader let relayAwakeID go, no writer that saw it awake
	// is left, and it looked once more since: Adds notify (see wakeSQL).
	asleep := false
	for {
		res, err := r.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		progress := res.published+res.parked > 0
		if progress {
			// Rows flow: writers need not notify while the relay comes
			// back for more on its own.
			asleep, writersDelay = false, writersRetry
			if err := r.awaken(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("could not tell writers the relay is awake; they notify", "err", err)
			}
		}
		if err != nil {
			publishFailures.WithLabelValues(r.cfg.Name).Inc()
			if !progress {
				failures++
				delay := min(time.Duration(1<<min(failures, 6))*50*time.Millisecond, 3*time.Second, tick)
				r.log.Error("publish failed; will retry", "err", err, "retry_in", delay)
				if !sleep(ctx, r.cfg.Clock, delay) {
					return nil
				}
				continue
			}
			// Some rows got out: the failing ones must not slow down the
			// rest, so go on at once; a round with no progress backs off.
			r.log.Warn("publish partly failed; continuing", "err", err,
				"published", res.published, "parked", res.parked)
		}
		failures = 0
		if progress && (err != nil || res.full) || res.probeIn < 0 {
			continue // more is waiting
		}
		writers := false // writers that will not notify are still running
		if res.leader && !asleep {
			alone, err := r.doze(ctx)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				writers = true // resigned: look again soon
			case alone:
				// Every writer that saw the relay awake has ended: one
				// more round publishes their rows, then Adds notify.
				asleep, writersDelay = true, writersRetry
				continue
			default:
				writers = true
			}
		}

		// Rows held back behind a transaction still running elsewhere in
		// the cluster become publishable when it ends, which sends no
		// NOTIFY: look again soon, then less and less often.
		var retryIn time.Duration // 0: no retry, wait for a wake-up
		if res.heldBack {
			if progress {
				heldDelay = heldBackRetry // back off only while nothing moves
			}
			retryIn = heldDelay
			heldDelay = min(heldDelay*2, tick)
		} else {
			heldDelay = heldBackRetry
			if res.probeIn > 0 { // blocked keys to retry, nothing held back
				retryIn = res.probeIn
			}
		}
		if writers {
			if retryIn == 0 || writersDelay < retryIn {
				retryIn = writersDelay
			}
			writersDelay = min(writersDelay*2, writersRetryMax)
		}
		var retry Timer
		var retryC <-chan time.Time
		if retryIn > 0 {
			retry = r.cfg.Clock.NewTimer(retryIn)
			retryC = retry.C()
		}
		r.waits.Add(1)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C():
			poll = r.cfg.Clock.NewTimer(tick)
		case <-retryC:
			r.retries.Add(1)
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// awaken takes relayAwakeID on the leader's connection, if it leads and
// does not hold it yet: from then on, Add does not notify. It does not
// wait: writers only test the lock in passing, and if one holds it just
// then (or a session was cut off holding it), writers go on notifying,
// which is slower but correct, and the next round that publishes tries
// again.
func (r *Relay) awaken(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil || r.awake {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	if err := r.conn.GetContext(ctx, &r.awake, `SELECT pg_try_advisory_lock($1::bigint # 'outbox'::regclass::oid::bigint)`, relayAwakeID); err != nil {
		// The statement may have taken the lock before it failed (a
		// cancelled statement leaves its session alive): a lock held
		// unknown to the relay would keep writers from notifying for good.
		// End the session, as doze does; the next round elects again.
		r.resign()
		return fmt.Errorf("outbox: take the awake lock: %w", err)
	}
	return nil
}

// doze lets relayAwakeID go, so that Adds from now on notify, if no writer
// that saw it held is still running, and reports whether it did; the rows
// those writers left unannounced are then visible to the next round.
// Otherwise the relay stays awake, and should look again soon. The test
// and the letting go are one statement: the writing lock is taken first,
// so a writer arriving in between finds it taken and notifies.
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
		r.listening.Store(true)
	})
	wg.Go(func() {
		defer listener.Close() // also ends a Listen still waiting to connect
		defer r.listening.Store(false)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-listener.Notify: // nil after a reconnect: flush anyway
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

// housekeep keeps the backlog gauges (oldest unsent age, parked rows) current and, while this relay leads,
// deletes sent rows past Retention — each on its own clock, so that neither
// an outage (no successful round) nor a steady backlog (no idle round)
// stops them.
func (r *Relay) housekeep(ctx context.Context) {
	// Each timer is armed again as it fires, like a ticker.
	gauge := r.cfg.Clock.NewTimer(gaugeEvery)
	cleanup := r.cfg.Clock.NewTimer(r.cfg.PollInterval * 30)
	defer func() {
		gauge.Stop()
		cleanup.Stop()
	}()
	r.updateGauge(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-gauge.C():
			gauge = r.cfg.Clock.NewTimer(gaugeEvery)
			r.updateGauge(ctx)
		case <-cleanup.C():
			cleanup = r.cfg.Clock.NewTimer(r.cfg.PollInterval * 30)
			if !r.leading.Load() {
				continue
			}
			if err := r.cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cleanup of sent rows failed", "err", err)
			}
		}
	}
}

// updateGauge reads the backlog gauges from the table in one statement.
func (r *Relay) updateGauge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	var got struct {
		Age    float64 `db:"age"`
		Parked int64   `db:"parked"`
	}
	// Each count reads a partial index of its own (outbox_publishable,
	// outbox_parked), never the sent rows kept for Retention.
	err := r.cfg.DB.GetContext(ctx, &got, `
		SELECT coalesce(extract(epoch FROM now() - (
		           SELECT min(created_at) FROM outbox WHERE sent_at IS NULL AND parked_at IS NULL)), 0)::float8 AS age,
		       (SELECT count(*) FROM outbox WHERE sent_at IS NULL AND parked_at IS NOT NULL) AS parked`)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("backlog gauges not updated", "err", err)
		}
		return
	}
	oldestUnsent.WithLabelValues(r.cfg.Name).Set(got.Age)
	parkedRows.WithLabelValues(r.cfg.Name).Set(float64(got.Parked))
}

func (r *Relay) cleanup(ctx context.Context) error {
	// A few thousand rows at a time: a backlog of sent rows (after an
	// outage, or a Retention just shortened) never becomes one long
	// DELETE that holds back vacuum and every relay's xmin horizon. The
	// oldest first, by the sent_at index, then each by its id: ORDER BY and
	// = ANY(ARRAY(…)) keep both on an index even in a generic plan (see
	// pg.StatementCacheSize), made without the cutoff's value, where IN
	// (…) would hash-join a scan of the whole table.
	for {
		res, err := r.cfg.DB.ExecContext(ctx, `
			DELETE FROM outbox WHERE id = ANY(ARRAY(
				SELECT id FROM outbox WHERE sent_at < now() - make_interval(secs => $1)
				ORDER BY sent_at LIMIT $2))`,
			r.cfg.Retention.Seconds(), cleanupBatch)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n < cleanupBatch {
			return nil
		}
	}
}

// cleanupBatch bounds one DELETE of sent rows.
const cleanupBatch = 5000

// tick is the longest Run waits between rounds: the leader's heartbeat
// (Lease/3 keeps its session well inside idle_session_timeout) and a
// standby's bid for the lock.
func (r *Relay) tick() time.Duration { return min(r.cfg.PollInterval, r.cfg.Lease/3) }

// hit runs the failpoint name, then the test hook, if any.
func (r *Relay) hit(name string) {
	failpoint.Hit(name)
	if h := r.hook.Load(); h != nil {
		(*h)(name)
	}
}

// sleep waits d on clock or until ctx ends, reporting whether the full
// wait elapsed.
func sleep(ctx context.Context, clock Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
