package participant

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/park"
)

// Parking behind a parked order (package park): once a routed event of an
// order fails permanently and is dead-lettered, its order's later events
// are parked behind it in the same transaction that would have applied
// them, until an operator replays or releases them. The consumer ends a
// batch at its failure, so the events behind it find the order parked.
// Within one partition the hand-over is exact; across topics an event
// applied between the failure's batch and the dead letter's commit is
// applied, as it would have been a moment earlier, which the saga's
// reactions tolerate.

// Outcome of a delivery parked behind its order.
const outcomeParked = "parked"

// parkBehind parks, within tx, the deliveries of parked orders behind
// them: each is stored in its order's parked rows, unmarked, and
// acknowledged. A copy of an event already applied is a duplicate, as ever:
// it is not parked, so a replay never meets it. It returns the others, in
// order.
func parkBehind(ctx context.Context, tx sqlx.ExtContext, service string, ds []*Delivery) ([]*Delivery, error) {
	keys := make([]string, 0, len(ds))
	for _, d := range ds {
		keys = append(keys, string(d.Msg.Key))
	}
	parked, err := park.Parked(ctx, tx, service, keys)
	if err != nil || len(parked) == 0 {
		return ds, err
	}
	var ids []string
	for _, d := range ds {
		if parked[string(d.Msg.Key)] {
			ids = append(ids, d.Event.ID)
		}
	}
	applied, err := idem.Processed(ctx, tx, service, ids)
	if err != nil {
		return nil, err
	}
	kept := ds[:0:0]
	for _, d := range ds {
		switch {
		case !parked[string(d.Msg.Key)]:
			kept = append(kept, d)
		case applied[d.Event.ID]:
			d.Log.Info("duplicate event skipped")
			d.Outcome = "duplicate"
		default:
			if err := park.Add(ctx, tx, service, park.EntryOf(d.Msg, "")); err != nil {
				return nil, err
			}
			d.Log.Warn("order is parked: event parked behind it until an operator replays or releases it")
			d.Outcome = outcomeParked
		}
	}
	return kept, nil
}

// Operator returns the service's park.Operator, which replays a parked
// message through the consumer's chain and apply, in the operator's
// transaction.
func (s Spec) Operator(db *sqlx.DB, log *slog.Logger) *park.Operator {
	front, react := s.stages(log)
	now := s.Now
	if now == nil {
		now = time.Now
	}
	return park.NewOperator(s.Name, db, log, func(ctx context.Context, tx *sqlx.Tx, m *sarama.ConsumerMessage) (string, error) {
		d := &delivery{Delivery: &Delivery{Msg: m}, replay: true}
		ctx, d.span = startSpan(ctx, s.Name, m) // the replay joins the saga's trace
		start := time.Now()
		err := front(ctx, d.Delivery)
		if err == nil && d.Outcome == "" { // routed
			err = s.apply(ctx, tx, []*delivery{d}, now(), react)
		}
		record(s.Name, d.Delivery, err, time.Since(start))
		endSpan(d.span, d.Delivery, err)
		return d.Outcome, err
	})
}

// Admin returns the service's operator API (park.Admin) as Run mounts it
// at /admin, behind v's Authenticate: for the operator role only, and not
// served at all when v is disabled, since no caller can then be known.
func (s Spec) Admin(db *sqlx.DB, log *slog.Logger, v *bearer.Verifier) http.Handler {
	if v.Disabled() {
		return park.Off(log)
	}
	return bearer.RequireOperator(log)(park.Admin(s.Operator(db, log), db, log))
}
