// Package store is the tracker's PostgreSQL adapter: the events it saw,
// each once, and one summary row per saga derived from them.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
)

// Migrations holds the tracker's tables.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Store reads and writes the tracker's tables. Reads see sagas at the
// store's clock: a running saga older than the SLA is stuck.
type Store struct {
	db  *sqlx.DB
	sla time.Duration
	now func() time.Time
}

// New returns a Store on db that calls a saga stuck once it has run for
// longer than sla by now's clock (time.Now if nil).
func New(db *sqlx.DB, sla time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, sla: sla, now: now}
}

// Recorded is what Record did.
type Recorded struct {
	// New is false for an event already recorded: nothing changed.
	New bool
	// Before and After are the saga's states around the event (Before is
	// Running for a saga's first event).
	Before, After domain.State
	StartedAt     time.Time
	EndedAt       *time.Time
}

// Ended reports whether this event ended its saga.
func (r Recorded) Ended() bool { return r.New && !r.Before.Terminal() && r.After.Terminal() }

// Record stores e unless its event id is already stored, and brings its
// saga's summary up to date — updated_at, when the saga was last seen, even
// for a duplicate — in one transaction. Errors are the
// database's, wrapped; the caller retries them.
func (s *Store) Record(ctx context.Context, e domain.Event) (Recorded, error) {
	var r Recorded
	err := pg.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		r, err = record(ctx, tx, e)
		return err
	})
	return r, err
}

func record(ctx context.Context, tx *sqlx.Tx, e domain.Event) (Recorded, error) {
	// The saga's row is locked before the event goes in: Forget, deleting
	// the saga meanwhile, waits for this transaction and then keeps it.
	before, err := lockSaga(ctx, tx, e)
	if err != nil {
		return Recorded{}, err
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO tracked_events (event_id, order_id, type, source, topic, partition, "offset", occurred_at, reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (event_id) DO NOTHING`,
		e.EventID, e.OrderID, e.Type, e.Service, e.Topic, e.Partition, e.Offset, e.At, e.Reason)
	if err != nil {
		return Recorded{}, fmt.Errorf("insert event %s: %w", e.EventID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Recorded{}, fmt.Errorf("insert event %s: %w", e.EventID, err)
	}
	if n == 0 {
		// A duplicate: the saga is as it was, but seen now. A copy
		// re-published at a later offset lives in Kafka longer than the
		// first, and retention counts from the last one seen — to the hour,
		// which spares a write per copy. A row lockSaga made just now for
		// an id stored under another order goes again.
		if _, err := tx.ExecContext(ctx, `
			WITH phantom AS (DELETE FROM sagas WHERE order_id = $1 AND event_count = 0)
			UPDATE sagas SET updated_at = now()
			WHERE order_id = $1 AND event_count > 0 AND updated_at < now() - interval '1 hour'`, e.OrderID); err != nil {
			return Recorded{}, fmt.Errorf("saga %s seen: %w", e.OrderID, err)
		}
		return Recorded{}, nil
	}
	evs, err := timeline(ctx, tx, e.OrderID)
	if err != nil {
		return Recorded{}, err
	}
	p := domain.Derive(evs)
	started := evs[0].At // the event just inserted is among them
	if _, err := tx.ExecContext(ctx, `
		UPDATE sagas SET state = $2, started_at = $3, ended_at = $4, waiting_for = $5, event_count = $6, reason = $7, updated_at = now()
		WHERE order_id = $1`,
		e.OrderID, p.State, started, p.EndedAt, p.WaitingFor, len(evs), p.Reason); err != nil {
		return Recorded{}, fmt.Errorf("update saga %s: %w", e.OrderID, err)
	}
	return Recorded{New: true, Before: before, After: p.State, StartedAt: started, EndedAt: p.EndedAt}, nil
}

// lockSaga creates the saga's row if this is its first event and locks it
// for the rest of tx, so that two events of one saga consumed at once from
// different topics update it one after the other, the second seeing the
// first's event, and Forget cannot delete it under them. It returns the
// saga's state before the event.
func lockSaga(ctx context.Context, tx *sqlx.Tx, e domain.Event) (domain.State, error) {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO sagas (order_id, state, started_at) VALUES ($1, 'running', $2)
		ON CONFLICT (order_id) DO NOTHING`, e.OrderID, e.At); err != nil {
		return "", fmt.Errorf("insert saga %s: %w", e.OrderID, err)
	}
	var state domain.State
	if err := tx.GetContext(ctx, &state, `SELECT state FROM sagas WHERE order_id = $1 FOR UPDATE`, e.OrderID); err != nil {
		return "", fmt.Errorf("lock saga %s: %w", e.OrderID, err)
	}
	return state, nil
}

// timeline returns the saga's events in timeline order (domain.Compare,
// which the ORDER BY spells out).
func timeline(ctx context.Context, q sqlx.QueryerContext, orderID string) ([]domain.Event, error) {
	var evs []domain.Event
	err := sqlx.SelectContext(ctx, q, &evs, `
		SELECT event_id, order_id, type, source, topic, partition, "offset", occurred_at, reason
		FROM tracked_events WHERE order_id = $1
		ORDER BY occurred_at, topic COLLATE "C", partition, "offset"`, orderID)
	if err != nil {
		return nil, fmt.Errorf("timeline of %s: %w", orderID, err)
	}
	for i := range evs {
		evs[i].At = evs[i].At.UTC()
	}
	return evs, nil
}

const summaryColumns = `order_id, state, started_at, ended_at, waiting_for, reason, event_count`

// Saga returns the saga of orderID with its timeline, as of the store's
// clock; a fault.NotFound error if the tracker has seen none of its events.
func (s *Store) Saga(ctx context.Context, orderID string) (domain.Saga, error) {
	// Both reads see one snapshot, so the summary and the timeline agree
	// while Record adds an event or Forget deletes the saga.
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return domain.Saga{}, fmt.Errorf("saga of order %s: begin: %w", orderID, err)
	}
	defer tx.Rollback() //nolint:errcheck // read only: nothing to keep
	sum, err := pg.Get[domain.Summary](ctx, tx, "saga of order "+orderID,
		`SELECT `+summaryColumns+` FROM sagas WHERE order_id = $1`, orderID)
	if err != nil {
		return domain.Saga{}, err
	}
	evs, err := timeline(ctx, tx, orderID)
	if err != nil {
		return domain.Saga{}, err
	}
	return domain.Saga{Summary: s.at(sum), Events: evs}, nil
}

func (s *Store) at(sum domain.Summary) domain.Summary {
	pg.InUTC(&sum.StartedAt, sum.EndedAt)
	return sum.At(s.now(), s.sla)
}

// Filter selects a page of sagas.
type Filter struct {
	// State keeps only sagas in that state at the store's clock; empty
	// keeps all.
	State domain.State
	// Limit is the page size, at least 1.
	Limit int
	// After continues a list from a page's Next; the zero Cursor starts it.
	After Cursor
}

// Page is one page of a list, newest saga first.
type Page struct {
	Sagas []domain.Summary
	// Next is the cursor of the following page; the zero Cursor after the
	// last one.
	Next Cursor
}

// Sagas returns a page of the sagas f selects, newest (latest first
// event) first. It pages by key — the last saga's (started_at, order_id) —
// not by OFFSET, so a page costs the same however deep, and sagas that
// start meanwhile do not shift the pages that follow.
func (s *Store) Sagas(ctx context.Context, f Filter) (Page, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	horizon := s.now().Add(-s.sla) // a running saga that started before it is stuck
	switch f.State {
	case "":
	case domain.Stuck:
		where = append(where, `state = 'running'`, `started_at < `+arg(horizon))
	case domain.Running:
		where = append(where, `state = 'running'`, `started_at >= `+arg(horizon))
	default:
		where = append(where, `state = `+arg(string(f.State)))
	}
	if !f.After.IsZero() {
		where = append(where, `(started_at, order_id) < (`+arg(f.After.startedAt)+`, `+arg(f.After.orderID)+`)`)
	}
	query := `SELECT ` + summaryColumns + ` FROM sagas`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY started_at DESC, order_id DESC LIMIT ` + arg(f.Limit+1) // one more: is there a next page?

	var rows []domain.Summary
	if err := sqlx.SelectContext(ctx, s.db, &rows, query, args...); err != nil {
		return Page{}, fmt.Errorf("list sagas: %w", err)
	}
	var p Page
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		last := rows[len(rows)-1]
		p.Next = Cursor{startedAt: last.StartedAt, orderID: last.OrderID}
	}
	p.Sagas = make([]domain.Summary, len(rows))
	for i, r := range rows {
		p.Sagas[i] = s.at(r)
	}
	return p, nil
}

// CountStuck returns how many sagas are stuck at the store's clock.
func (s *Store) CountStuck(ctx context.Context) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM sagas WHERE state = 'running' AND started_at < $1`,
		s.now().Add(-s.sla))
	if err != nil {
		return 0, fmt.Errorf("count stuck sagas: %w", err)
	}
	return n, nil
}

// Cursor is where a list continues: after the saga that started at
// startedAt with orderID. Clients get it as an opaque string (String) and
// send it back (ParseCursor).
type Cursor struct {
	startedAt time.Time
	orderID   string
}

// IsZero reports whether c is the start of a list.
func (c Cursor) IsZero() bool { return c.orderID == "" }

// cursorVersion prefixes every cursor, so its format can change without
// misreading old ones.
const cursorVersion = "v1"

// String returns the cursor in the opaque form clients pass around:
// base64url of "v1:<started_at in Unix microseconds>:<order id>" — the
// database's precision, so the key compares exactly. "" for the zero
// Cursor.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	raw := cursorVersion + ":" + strconv.FormatInt(c.startedAt.UnixMicro(), 10) + ":" + c.orderID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ErrBadCursor is returned by ParseCursor for a string String did not make.
var ErrBadCursor = errors.New("not a cursor this tracker issued")

// ParseCursor reads a cursor made by String; "" is the zero Cursor. Any
// other string fails with an error wrapping ErrBadCursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := fmt.Errorf("cursor %q: %w", s, ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	version, rest, ok1 := strings.Cut(string(raw), ":")
	micros, orderID, ok2 := strings.Cut(rest, ":")
	us, err := strconv.ParseInt(micros, 10, 64)
	if !ok1 || !ok2 || version != cursorVersion || err != nil || orderID == "" {
		return Cursor{}, bad
	}
	return Cursor{startedAt: time.UnixMicro(us).UTC(), orderID: orderID}, nil
}
