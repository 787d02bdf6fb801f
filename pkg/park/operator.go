package park

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/fault"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/tick"
)

// Operator is what an operator does with a service's parked orders once
// the cause is fixed: list them, replay their rows through the service's
// reactions, in order, or release them unapplied. Replaying or releasing
// what is already resolved changes nothing and says so, so either can be
// run again. The admin API (Admin) and choreoctl serve it.
type Operator struct {
	service string
	db      *sqlx.DB
	log     *slog.Logger
	replay  ReplayFunc
}

// ReplayFunc applies m within tx as the service's consumer would have,
// and says how it ended: applied, duplicate or not_routed. A permanent
// error (consumer.Permanent) means it fails still.
type ReplayFunc func(ctx context.Context, tx *sqlx.Tx, m *sarama.ConsumerMessage) (outcome string, err error)

// NewOperator returns the Operator of service's parked rows in db, which
// replays them with replay.
func NewOperator(service string, db *sqlx.DB, log *slog.Logger, replay ReplayFunc) *Operator {
	return &Operator{service: service, db: db, log: log.With("component", "operator"), replay: replay}
}

// ResolveTimeout bounds a replay's or release's transaction, like a
// consumer's: while it holds the order's lock, a batch that meets the
// order waits for it. The server's web.WriteTimeout is longer, so the
// answer of a replay that took this long still arrives.
const ResolveTimeout = 30 * time.Second

// Target picks the parked rows an operator acts on: all of one order's
// (Key), or one row, by its event's id (EventID) or its number (Seq). Set
// one.
type Target struct {
	Key     string
	EventID string
	Seq     int64
	// Through, with Key, leaves out the rows parked after row Through:
	// those the operator has not seen. Parked since, they stay parked.
	Through int64
}

func (t Target) filter() Filter {
	return Filter{Key: t.Key, EventID: t.EventID, Seq: t.Seq, Through: t.Through}
}

func (t Target) String() string {
	switch {
	case t.Key != "":
		return "order " + t.Key
	case t.EventID != "":
		return "event " + t.EventID
	default:
		return fmt.Sprintf("row %d", t.Seq)
	}
}

// ResolvedRow is a row an Operator resolved, and how it ended: applied,
// duplicate (it had been applied already), not_routed (not this service's
// event) or released.
type ResolvedRow struct {
	Row
	Outcome string `json:"outcome"`
}

// Report is what a replay or a release did.
type Report struct {
	Service string `json:"service"`
	// Resolved are the rows resolved now, in order.
	Resolved []ResolvedRow `json:"resolved"`
	// Already lists the selected rows resolved before: asked again,
	// nothing changes.
	Already []Row `json:"already,omitempty"`
}

// StillFailing is the error of a replay whose row fails again: nothing of
// the replay is kept, and the row, with the new reason, stays parked.
type StillFailing struct {
	Row Row
	Err error
}

func (e *StillFailing) Error() string {
	return fmt.Sprintf("row %d (%s at %s/%d/%d) still fails, so its order stays parked: %v",
		e.Row.Seq, deref(e.Row.EventType), e.Row.Topic, e.Row.Partition, e.Row.Offset, e.Err)
}

// List returns the rows parked now (an order's, or every one, up to
// limit), in the order they were parked, without their values.
func (o *Operator) List(ctx context.Context, key string, limit int) ([]Row, error) {
	return Rows(ctx, o.db, o.service, Filter{Key: key, Limit: limit, NoValue: true})
}

// Replay applies the selected rows through the service's reactions, in
// the order they were parked, in one transaction, and resolves them: each
// event is marked processed, so one applied before (or a copy) is a
// duplicate. An order's rows replay from its first: a single row replays
// only if no row of its order is parked before it. If a row fails again,
// nothing is applied and a *StillFailing says why.
func (o *Operator) Replay(ctx context.Context, target Target) (Report, error) {
	return o.resolve(ctx, target, Replayed)
}

// Release resolves the selected rows without applying them, and marks
// their events processed, so that a redelivery of one is a duplicate: the
// operator has settled them by other means. An order whose rows are all
// resolved flows again.
func (o *Operator) Release(ctx context.Context, target Target) (Report, error) {
	return o.resolve(ctx, target, Released)
}

func (o *Operator) resolve(ctx context.Context, target Target, how string) (Report, error) {
	res := Report{Service: o.service}
	if n := btoi(target.Key != "") + btoi(target.EventID != "") + btoi(target.Seq > 0); n != 1 {
		return res, fault.Errorf(fault.Invalid, "select the rows by one of order, event and row")
	}
	if target.Through < 0 || (target.Through > 0 && target.Key == "") {
		return res, fault.Errorf(fault.Invalid, "through: a row number, with an order")
	}
	f := target.filter()
	f.Resolved = true
	seen, err := Rows(ctx, o.db, o.service, f)
	if err != nil {
		return res, err
	}
	var key *string
	for _, r := range seen {
		if r.ResolvedAt != nil {
			res.Already = append(res.Already, r)
		} else if key == nil {
			key = r.Key
			if key == nil {
				key = new(string) // a dead letter with no key: it holds nothing up
			}
		}
	}
	if len(seen) == 0 {
		return res, fault.Errorf(fault.NotFound, "nothing of %s was ever parked by %s", target, o.service)
	}
	if key == nil {
		return res, nil // all resolved before: nothing to do
	}
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	var failing *StillFailing
	// A deadlock with the consumer's batches is retried a few times.
	for attempt := 1; ; attempt++ {
		res.Resolved, failing = nil, nil
		err = pg.InTx(ctx, o.db, func(tx *sqlx.Tx) error {
			r, f, err := o.resolveLocked(ctx, tx, target, *key, how)
			res.Resolved, failing = r, f
			if f != nil {
				return f // roll back what the replay applied
			}
			return err
		})
		if err == nil || !pg.LockConflict(err) || attempt == 3 {
			break
		}
	}
	if failing != nil {
		res.Resolved = nil
		if ferr := Fail(ctx, o.db, failing.Row.Seq, failing.Err.Error()); ferr != nil {
			return res, errors.Join(failing, ferr)
		}
		o.log.Warn("replay failed again; the order stays parked", "selected", target.String(), "seq", failing.Row.Seq, "err", failing.Err)
		return res, failing
	}
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", how, target, err)
	}
	by, _ := bearer.From(ctx) // who, for the record: a release can mean a refund never made
	for _, r := range res.Resolved {
		o.log.Info("parked row resolved", "resolution", how, "outcome", r.Outcome, "seq", r.Seq,
			"order_id", deref(r.Key), "event_id", deref(r.EventID), "event_type", deref(r.EventType), "operator", by.Subject)
	}
	return res, nil
}

// resolveLocked resolves, within tx and holding the order's lock, the
// selected rows of order key (empty: a row with no key).
func (o *Operator) resolveLocked(ctx context.Context, tx *sqlx.Tx, target Target, key, how string) ([]ResolvedRow, *StillFailing, error) {
	f := Filter{Key: key, Through: target.Through, ForUpdate: true}
	if key == "" {
		f = target.filter()
		f.ForUpdate = true
	} else if err := Lock(ctx, tx, o.service, key); err != nil {
		return nil, nil, err
	}
	open, err := Rows(ctx, tx, o.service, f) // read again under the lock
	if err != nil {
		return nil, nil, err
	}
	chosen := open
	if target.Key == "" { // one row
		chosen = nil
		for i, r := range open {
			if (target.EventID != "" && deref(r.EventID) == target.EventID) || (target.Seq != 0 && r.Seq == target.Seq) {
				if how == Replayed && i > 0 {
					return nil, nil, fault.Errorf(fault.Conflict, "%s of order %s is behind row %d, parked before it: replay the order, or that row first", target, key, open[0].Seq)
				}
				chosen = []Row{r}
				break
			}
		}
	}
	var done []ResolvedRow
	seqs := make([]int64, 0, len(chosen))
	for _, r := range chosen {
		outcome, failing, err := o.apply(ctx, tx, r, how)
		if failing != nil || err != nil {
			return nil, failing, err
		}
		done = append(done, ResolvedRow{Row: r, Outcome: outcome})
		seqs = append(seqs, r.Seq)
	}
	return done, nil, Resolve(ctx, tx, seqs, how)
}

// apply replays row r within tx, as the consumer would have applied it, or
// releases it.
func (o *Operator) apply(ctx context.Context, tx *sqlx.Tx, r Row, how string) (string, *StillFailing, error) {
	headers, err := r.Headers()
	if err != nil {
		return "", nil, err
	}
	// The message's own key: a dead letter that parked nothing has no park
	// key, and the Guard refuses an event whose key is not its order id.
	m := &sarama.ConsumerMessage{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.MsgKey, Value: r.Value, Headers: recordHeaders(headers)}
	if m.Key == nil && r.Key != nil {
		m.Key = []byte(*r.Key)
	}
	if how == Released {
		if r.EventID != nil {
			if _, err := idem.Mark(ctx, tx, o.service, *r.EventID, idem.Origin{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}); err != nil {
				return "", nil, err
			}
		}
		return Released, nil, nil
	}

	outcome, err := o.replay(ctx, tx, m)
	switch {
	case consumer.IsPermanent(err):
		return "", &StillFailing{Row: r, Err: err}, nil
	case err != nil:
		return "", nil, err
	}
	return outcome, nil, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The parked gauges, counted from the database like the outbox's parked
// rows, so that they survive restarts and agree between instances.
var (
	parkedOrders = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_parked_orders",
		Help: "Orders (Kafka keys) parked by a permanent failure and waiting for an operator, by service.",
	}, []string{"service"})
	parkedEvents = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_parked_events",
		Help: "Messages kept in parked_events, failed or parked behind a failure, unresolved, by service.",
	}, []string{"service"})
	parkedOldest = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "choreo_parked_oldest_seconds",
		Help: "How long the oldest unresolved parked message has waited for an operator, by service; 0 when none.",
	}, []string{"service"})
)

// WatchGauges keeps the parked gauges of service current, from now every
// 15s, until ctx ends.
func WatchGauges(ctx context.Context, db *sqlx.DB, service string, log *slog.Logger) error {
	update := func(ctx context.Context) {
		c, err := Count(ctx, db, service)
		if err == nil {
			parkedEvents.WithLabelValues(service).Set(float64(c.Rows))
			parkedOrders.WithLabelValues(service).Set(float64(c.Keys))
			parkedOldest.WithLabelValues(service).Set(c.OldestSeconds)
		} else if ctx.Err() == nil {
			log.Debug("parked gauges not updated", "err", err)
		}
	}
	update(ctx)
	return tick.Every(ctx, 15*time.Second, update)
}
