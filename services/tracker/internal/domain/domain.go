// Package domain holds what the tracker concludes from a saga's events, as
// pure functions: the order of its timeline, whether and how it ended, the
// step it waits for, and whether it is late.
package domain

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

// State is where a saga stands, as far as its published events tell.
type State string

// Saga states. Running and the two terminal states follow from the events
// alone; Stuck is Running seen from a clock, past the SLA (see Saga.At).
const (
	Running   State = "running"
	Completed State = "completed"
	Cancelled State = "cancelled"
	Stuck     State = "stuck"
)

// States lists every State, for validating a requested one.
var States = []State{Running, Completed, Cancelled, Stuck}

// Terminal reports whether s is an end state: completed or cancelled.
func (s State) Terminal() bool { return s == Completed || s == Cancelled }

// Event is one published event of a saga as the tracker saw it: the
// envelope's identity, type, source and time, where Kafka stored it, and
// the reason its payload gives (ReasonOf). The rest of the payload is not
// kept: the tracker must read types it does not know.
type Event struct {
	EventID   string    `db:"event_id" json:"event_id"`
	OrderID   string    `db:"order_id" json:"-"`
	Type      string    `db:"type" json:"type"`
	Service   string    `db:"source" json:"service"`
	Topic     string    `db:"topic" json:"topic"`
	Partition int32     `db:"partition" json:"partition"`
	Offset    int64     `db:"offset" json:"offset"`
	At        time.Time `db:"occurred_at" json:"at"`
	Reason    string    `db:"reason" json:"reason,omitempty"`
}

// MarshalJSON adds the event's kind, derived from its type, so the page
// draws a failure or a compensation unlike a forward step without a list
// of types of its own.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event // without this method
	return json.Marshal(struct {
		plain
		Kind Kind `json:"kind"`
	}{plain(e), KindOf(e.Type)})
}

// Kind is the part an event plays in its saga.
type Kind string

// Event kinds.
const (
	Forward      Kind = "forward"      // a step done: created, paid, reserved, scheduled
	Failure      Kind = "failure"      // a step refused, which turns the saga back
	Compensation Kind = "compensation" // an effect undone, or a cancel asking for it
	Outcome      Kind = "outcome"      // the order service's announcement of the end
	Other        Kind = "other"        // a type this build does not know
)

var kinds = map[string]Kind{
	events.TypeOrderCreated:         Forward,
	events.TypePaymentCompleted:     Forward,
	events.TypeInventoryReserved:    Forward,
	events.TypeShipmentScheduled:    Forward,
	events.TypePaymentDeclined:      Failure,
	events.TypeInventoryRejected:    Failure,
	events.TypeShipmentFailed:       Failure,
	events.TypeInventoryReleased:    Compensation,
	events.TypePaymentRefunded:      Compensation,
	events.TypeOrderCancelRequested: Compensation,
	events.TypePaymentCancelled:     Compensation,
	events.TypeInventoryCancelled:   Compensation,
	events.TypeShipmentCancelled:    Compensation,
	events.TypeOrderCompleted:       Outcome,
	events.TypeOrderCancelled:       Outcome,
}

// KindOf returns the kind of an event of type typ; Other if unknown.
func KindOf(typ string) Kind {
	if k, ok := kinds[typ]; ok {
		return k
	}
	return Other
}

// reasonRE is what a reason code looks like. Anything else in a payload
// (free text, a newer producer's object) is not shown as a reason.
var reasonRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ReasonOf returns the reason an event's payload gives, in the words of
// the service that produced it: PaymentDeclined's detail, the reason field
// of every other type (a failure, a compensation, OrderCancelled's), or ""
// when there is none or it is no reason code. It never fails: the tracker
// reads every payload, well-formed or not.
func ReasonOf(typ string, payload []byte) string {
	var p struct {
		Reason any `json:"reason"`
		Detail any `json:"detail"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	v := p.Reason
	if typ == events.TypePaymentDeclined {
		v = p.Detail
	}
	if s, ok := v.(string); ok && reasonRE.MatchString(s) {
		return s
	}
	return ""
}

// Compare orders events for a timeline: by the time their producer says
// they occurred, then by topic, partition and offset, so that events with
// one timestamp keep a stable order, and events of one partition keep
// Kafka's. Producers' clocks may disagree; see docs/tracker.md.
func Compare(a, b Event) int {
	return cmp.Or(
		a.At.Compare(b.At),
		cmp.Compare(a.Topic, b.Topic),
		cmp.Compare(a.Partition, b.Partition),
		cmp.Compare(a.Offset, b.Offset),
	)
}

// Sort puts events in timeline order (Compare).
func Sort(evs []Event) { slices.SortStableFunc(evs, Compare) }

// Progress is what a saga's events alone say about it: running or ended,
// when it ended and why, and the step it waits for while running.
type Progress struct {
	State State
	// EndedAt is the time of the event that ended the saga; nil while it runs.
	EndedAt *time.Time
	// Reason is why the saga ended, or is turning back: the reason of the
	// event that ended it (OrderCancelled's, the order's own word), else
	// the latest reason any of its events gave. Empty for a saga that
	// completed or goes forward.
	Reason string
	// WaitingFor names the step the saga waits for while it runs (see
	// Next); empty once it ended, or when no event the tracker knows
	// says what comes next.
	WaitingFor string
}

// Steps the saga can wait for, named after the service that takes them.
// A compensation names the service and what it undoes.
const (
	StepPayment          = "payment"
	StepInventory        = "inventory"
	StepShipping         = "shipping"
	StepOrder            = "order"
	StepPaymentRefund    = "payment refund"
	StepInventoryRelease = "inventory release"
	// While a cancel is in progress the saga waits for each participant's
	// acknowledgement that it undid its step.
	StepPaymentCancel   = "payment cancel"
	StepInventoryCancel = "inventory cancel"
	StepShippingCancel  = "shipping cancel"
)

// cancelAcks are the acknowledgements a cancel waits for, with the step
// each one ends.
var cancelAcks = []struct{ ack, step string }{
	{events.TypePaymentCancelled, StepPaymentCancel},
	{events.TypeInventoryCancelled, StepInventoryCancel},
	{events.TypeShipmentCancelled, StepShippingCancel},
}

// Next maps each event of the saga's paths to the step it hands over to:
// forward (OrderCreated → payment charges), or compensating (ShipmentFailed
// → inventory releases). ShipmentScheduled, PaymentDeclined and
// PaymentRefunded hand over to the order service, which records the end
// and announces it (OrderCompleted, OrderCancelled).
var Next = map[string]string{
	events.TypeOrderCreated:      StepPayment,
	events.TypePaymentCompleted:  StepInventory,
	events.TypeInventoryReserved: StepShipping,
	events.TypeInventoryRejected: StepPaymentRefund,
	events.TypeShipmentFailed:    StepInventoryRelease,
	events.TypeInventoryReleased: StepPaymentRefund,
	events.TypeShipmentScheduled: StepOrder,
	events.TypePaymentDeclined:   StepOrder,
	events.TypePaymentRefunded:   StepOrder,
}

// ends are the events that say a saga ended: the order service's own
// announcements, and — for sagas produced before it announced them — the
// last step of each path, whose arrival at the order service ends the saga.
var (
	announced = map[string]State{events.TypeOrderCompleted: Completed, events.TypeOrderCancelled: Cancelled}
	inferred  = map[string]State{
		events.TypeShipmentScheduled: Completed,
		events.TypePaymentDeclined:   Cancelled,
		events.TypePaymentRefunded:   Cancelled,
	}
)

// Derive returns the progress that evs, in timeline order (Sort), show. The
// order service's announcement (OrderCompleted, OrderCancelled) ends a
// saga; without one, the last step of a path ends it by inference, unless a
// cancel was requested: the order ignores the other paths' ends until every
// participant acknowledged the cancel, so then only its announcement ends
// the saga. A running saga waits for the step its last known event hands
// over to; events of types the tracker does not know appear in the timeline
// but neither end a saga nor move its step.
func Derive(evs []Event) Progress {
	p := derive(evs)
	if p.Reason == "" && p.State != Completed {
		p.Reason = latestReason(evs)
	}
	return p
}

func derive(evs []Event) Progress {
	if p, ok := endedBy(evs, announced); ok {
		return p
	}
	if cancelling(evs) {
		return Progress{State: Running, WaitingFor: missingAck(evs)}
	}
	if p, ok := endedBy(evs, inferred); ok {
		return p
	}
	p := Progress{State: Running}
	for _, e := range evs {
		if step, ok := Next[e.Type]; ok {
			p.WaitingFor = step
		}
	}
	return p
}

// latestReason is the reason of the last of evs that gives one.
func latestReason(evs []Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Reason != "" {
			return evs[i].Reason
		}
	}
	return ""
}

// cancelling reports whether evs hold a cancel request.
func cancelling(evs []Event) bool {
	return slices.ContainsFunc(evs, func(e Event) bool { return e.Type == events.TypeOrderCancelRequested })
}

// missingAck is the step of the first cancel acknowledgement evs lack, or
// the order service's once all are in.
func missingAck(evs []Event) string {
	for _, a := range cancelAcks {
		if !slices.ContainsFunc(evs, func(e Event) bool { return e.Type == a.ack }) {
			return a.step
		}
	}
	return StepOrder
}

// endedBy returns the progress of a saga ended by the first of evs whose
// type ends maps to a state.
func endedBy(evs []Event, ends map[string]State) (Progress, bool) {
	for _, e := range evs {
		if s, ok := ends[e.Type]; ok {
			at := e.At
			return Progress{State: s, EndedAt: &at, Reason: e.Reason}, true
		}
	}
	return Progress{}, false
}

// Summary is a saga without its events, as lists show it.
type Summary struct {
	OrderID    string     `db:"order_id" json:"order_id"`
	State      State      `db:"state" json:"state"`
	StartedAt  time.Time  `db:"started_at" json:"started_at"`
	EndedAt    *time.Time `db:"ended_at" json:"ended_at"`
	WaitingFor string     `db:"waiting_for" json:"waiting_for,omitempty"`
	// Reason is Progress.Reason: why the saga ended or is turning back.
	Reason     string `db:"reason" json:"reason,omitempty"`
	EventCount int    `db:"event_count" json:"event_count"`
}

// At returns s as seen at now: a running saga whose first event occurred
// more than sla before now is stuck. Only the clock tells stuck from
// running — a passive observer cannot tell a slow step from a lost one.
func (s Summary) At(now time.Time, sla time.Duration) Summary {
	if s.State == Running && IsStuck(s.StartedAt, now, sla) {
		s.State = Stuck
	}
	return s
}

// IsStuck reports whether a saga started at startedAt and still running at
// now has outlived sla.
func IsStuck(startedAt, now time.Time, sla time.Duration) bool {
	return now.Sub(startedAt) > sla
}

// Saga is one saga with its timeline.
type Saga struct {
	Summary
	Events []Event `json:"events"`
}
