package outbox

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/jmoiron/sqlx"
)

// Hooks for the tests in package outbox_test, which cannot live in this
// package: they use internal/testenv, which imports it.

// OldestUnsent returns the backlog gauge of the relay named name.
func OldestUnsent(name string) float64 { return value(oldestUnsent.WithLabelValues(name)) }

// Published returns the published-rows counter of the relay named name.
func Published(name string) float64 { return value(published.WithLabelValues(name)) }

// Leader returns the leader gauge of the relay named name.
func Leader(name string) float64 { return value(leaderGauge.WithLabelValues(name)) }

// Refused returns the refused-rows counter of the relay named name.
func Refused(name string) float64 { return value(refused.WithLabelValues(name)) }

// RefusedRows returns the refused-rows gauge of the relay named name.
func RefusedRows(name string) float64 { return value(refusedRows.WithLabelValues(name)) }

// PublishBatches returns how many batches the publish-latency histogram of
// the relay named name has timed.
func PublishBatches(name string) uint64 {
	var d dto.Metric
	if err := publishSeconds.WithLabelValues(name).(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return d.GetHistogram().GetSampleCount()
}

// value reads a gauge or counter.
func value(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// The relay's intervals, for tests that move a fake Clock by them.
const (
	HeldBackRetry     = heldBackRetry
	UnknownTopicGrace = unknownTopicGrace
	GaugeEvery        = gaugeEvery
	ProbeFirst        = probeFirst
	ProbeMax          = probeMax
)

// watched is what the tests see of one relay through observe.
type watched struct {
	listening atomic.Bool
	waits     atomic.Int64 // times Run went to wait for a wake-up
	retries   atomic.Int64 // rounds started by the held-back retry timer
	hook      atomic.Pointer[func(point string)]
}

var watches sync.Map // *Relay → *watched

func watch(r *Relay) *watched {
	if w, ok := watches.Load(r); ok {
		return w.(*watched)
	}
	w, _ := watches.LoadOrStore(r, new(watched))
	return w.(*watched)
}

func init() {
	observe = func(r *Relay, event string) {
		w := watch(r)
		switch event {
		case "listening":
			w.listening.Store(true)
		case "deaf":
			w.listening.Store(false)
		case "wait":
			w.waits.Add(1)
		case "retry":
			w.retries.Add(1)
		default: // a failpoint
			if h := w.hook.Load(); h != nil {
				(*h)(event)
			}
		}
	}
}

// SetHook makes r call hook at each of its failpoints (failpoint.AfterPublish,
// failpoint.BetweenBatches), in the goroutine running the round. A hook that
// blocks freezes the relay there exactly as SIGSTOP would, as far as
// PostgreSQL can tell: its leader session stays open, and idle.
func SetHook(r *Relay, hook func(point string)) { watch(r).hook.Store(&hook) }

// Blocked returns how many keys r has blocked after a failure.
func Blocked(r *Relay) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.blocked.keys)
}

// Waits returns how many times r's Run went to wait for a wake-up: once it
// grows, the round before has ended and its timers are armed.
func Waits(r *Relay) int64 { return watch(r).waits.Load() }

// Listening reports whether r's LISTEN is active.
func Listening(r *Relay) bool { return watch(r).listening.Load() }

// LeaderPID returns the backend pid of r's leader session, 0 if r does not lead.
func LeaderPID(r *Relay) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return 0, nil
	}
	var pid int
	err := r.conn.GetContext(context.Background(), &pid, `SELECT pg_backend_pid()`)
	return pid, err
}

// HeldBackRetries returns how many rounds r's held-back retry timer started;
// rounds woken by NOTIFY or the poll are not counted.
func HeldBackRetries(r *Relay) int64 { return watch(r).retries.Load() }

// LeaderSetting returns the setting name of r's leader session, "" if r
// does not lead.
func LeaderSetting(r *Relay, name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return "", nil
	}
	var v string
	err := r.conn.GetContext(context.Background(), &v, `SELECT current_setting($1)`, name)
	return v, err
}

// Awaken makes r, which must lead, tell writers it is awake, as Run does
// after a round that published.
func Awaken(r *Relay) error { return r.awaken(context.Background()) }

// Doze makes r let writers know it sleeps, as Run does after an idle
// round, and reports whether it could: no writer that saw it awake runs.
func Doze(r *Relay) (bool, error) { return r.doze(context.Background()) }

// HandOver is Start's hand-over of the outbox to Debezium, whose
// connector may write topics.
func HandOver(ctx context.Context, db *sqlx.DB, topics ...string) (int64, error) {
	return handOver(ctx, db, topics, slog.New(slog.DiscardHandler))
}

// HandOverLogged is HandOver logging to log.
func HandOverLogged(ctx context.Context, db *sqlx.DB, log *slog.Logger, topics ...string) (int64, error) {
	return handOver(ctx, db, topics, log)
}
