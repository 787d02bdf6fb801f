package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/domain"
	"github.com/choreo-saga/choreo/services/order/internal/ordertest"
	"github.com/choreo-saga/choreo/services/order/internal/store"
)

// createFor stores a new order of customer and returns its id.
func createFor(t *testing.T, st *store.Store, customer string) string {
	t.Helper()
	d := ordertest.Draft(t, 1)
	d.CustomerID = customer
	o, e := ordertest.New(t, d)
	if _, _, err := st.Create(context.Background(), o, "", e); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return o.ID
}

// listAll follows next_cursor from the first page to the last and returns
// the ids in the order listed.
func listAll(t *testing.T, st *store.Store, q domain.ListQuery) (ids []string, pages int) {
	t.Helper()
	for {
		p, err := st.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		pages++
		if len(p.Orders) > q.Limit {
			t.Fatalf("page of %d orders, limit %d", len(p.Orders), q.Limit)
		}
		for _, o := range p.Orders {
			ids = append(ids, o.ID)
		}
		if p.NextCursor == "" {
			return ids, pages
		}
		if len(p.Orders) != q.Limit {
			t.Fatalf("a page of %d orders (limit %d) has a next_cursor", len(p.Orders), q.Limit)
		}
		c, err := domain.DecodeCursor(p.NextCursor)
		if err != nil {
			t.Fatalf("next_cursor %q: %v", p.NextCursor, err)
		}
		q.After = &c
		if pages > 100 {
			t.Fatal("more than 100 pages: the cursor does not advance")
		}
	}
}

// newestFirst returns the ids of the orders matching where, as the
// listing must return them.
func newestFirst(t *testing.T, db *sqlx.DB, where string, args ...any) []string {
	t.Helper()
	var ids []string
	if err := db.Select(&ids, `SELECT id FROM orders WHERE `+where+` ORDER BY created_at DESC, id DESC`, args...); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestListPagesThroughEqualTimestampsWithoutLossOrRepeat(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	customer := "c-" + uuid.NewString()[:8]
	for range 11 {
		createFor(t, st, customer)
	}
	// Seven orders created in the same microsecond, between an older and
	// a newer group: only the id orders them, and a page boundary falls
	// inside them for every page size below.
	if _, err := db.Exec(`
		UPDATE orders SET created_at = CASE
			WHEN rn <= 2 THEN timestamptz '2026-11-25 09:30:00.000002Z'
			WHEN rn <= 9 THEN timestamptz '2026-11-25 09:30:00.000001Z'
			ELSE timestamptz '2026-11-25 09:30:00Z' END
		FROM (SELECT id AS rid, row_number() OVER (ORDER BY id) AS rn FROM orders) r
		WHERE id = r.rid`); err != nil {
		t.Fatal(err)
	}
	want := newestFirst(t, db, "customer_id = $1", customer)
	if len(want) != 11 {
		t.Fatalf("%d orders, want 11", len(want))
	}
	for _, limit := range []int{1, 2, 3, 4, 5, 10, 11, 12, 100} {
		t.Run(fmt.Sprintf("Limit%d", limit), func(t *testing.T) {
			got, pages := listAll(t, st, domain.ListQuery{Limit: limit})
			if !slices.Equal(got, want) {
				t.Fatalf("listed\n %v\nwant\n %v", got, want)
			}
			if wantPages := (11 + limit - 1) / limit; pages != wantPages {
				t.Fatalf("%d pages, want %d", pages, wantPages)
			}
		})
	}

	t.Run("AnOrderCreatedMeanwhileShiftsNothing", func(t *testing.T) {
		first, err := st.List(context.Background(), domain.ListQuery{Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		createFor(t, st, customer) // newest: would push an OFFSET page down by one
		c, err := domain.DecodeCursor(first.NextCursor)
		if err != nil {
			t.Fatal(err)
		}
		rest, _ := listAll(t, st, domain.ListQuery{Limit: 4, After: &c})
		if !slices.Equal(rest, want[4:]) {
			t.Fatalf("after the first page: %v, want %v", rest, want[4:])
		}
	})
}

func TestListFilters(t *testing.T) {
	db, st := testenv.Store(t, order.Schema, store.New)
	ctx := context.Background()
	a, b := "c-"+uuid.NewString()[:8], "c-"+uuid.NewString()[:8]
	var aIDs []string
	for range 5 {
		aIDs = append(aIDs, createFor(t, st, a))
	}
	for range 3 {
		createFor(t, st, b)
	}
	setStatus := func(id string, s domain.Status, reason string) {
		err := pg.InTx(ctx, db, func(tx *sqlx.Tx) error {
			return store.SetState(ctx, tx, id, domain.State{Status: s, Reason: reason}, time.Now())
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setStatus(aIDs[0], domain.StatusCancelled, events.ReasonOutOfStock)
	setStatus(aIDs[2], domain.StatusCancelled, events.ReasonInsufficientFunds)
	setStatus(aIDs[3], domain.StatusCompleted, "")

	tests := []struct {
		name  string
		q     domain.ListQuery
		where string
		args  []any
	}{
		{"All", domain.ListQuery{}, "true", nil},
		{"Customer", domain.ListQuery{CustomerID: a}, "customer_id = $1", []any{a}},
		{"OtherCustomer", domain.ListQuery{CustomerID: b}, "customer_id = $1", []any{b}},
		{"Status", domain.ListQuery{Status: domain.StatusPending}, "status = 'PENDING'", nil},
		{"CustomerAndStatus", domain.ListQuery{CustomerID: a, Status: domain.StatusCancelled}, "customer_id = $1 AND status = 'CANCELLED'", []any{a}},
		{"NoMatch", domain.ListQuery{CustomerID: b, Status: domain.StatusCompleted}, "false", nil},
		{"UnknownCustomer", domain.ListQuery{CustomerID: "nobody"}, "false", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := newestFirst(t, db, tt.where, tt.args...)
			for _, limit := range []int{2, 100} {
				q := tt.q
				q.Limit = limit
				got, _ := listAll(t, st, q)
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d: listed %v, want %v", limit, got, want)
				}
			}
			p, err := st.List(ctx, domain.ListQuery{CustomerID: tt.q.CustomerID, Status: tt.q.Status, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if p.Orders == nil {
				t.Fatal("orders is nil; the API would answer null")
			}
			for _, o := range p.Orders {
				if (tt.q.CustomerID != "" && o.CustomerID != tt.q.CustomerID) || (tt.q.Status != "" && o.Status != tt.q.Status) || len(o.Items) == 0 || o.CreatedAt.IsZero() {
					t.Fatalf("listed %+v for %+v", o, tt.q)
				}
			}
		})
	}
	if n := len(newestFirst(t, db, "customer_id = $1 AND status = 'CANCELLED'", a)); n != 2 {
		t.Fatalf("fixture has %d cancelled orders of a, want 2", n)
	}
}

// TestListIsServedByAnIndex EXPLAINs List's query for every filter
// combination, first page and later: an index scan that both filters and
// orders — no Sort node, no Filter on rows read. Sequential scans and
// sorts are priced out, since on a table this small the planner would
// rightly prefer them; what is checked is that an index exists that needs
// neither.
func TestListIsServedByAnIndex(t *testing.T) {
	db, _ := testenv.Store(t, order.Schema, store.New)
	ctx := context.Background()
	after := &domain.Cursor{CreatedAt: time.Now().UTC(), ID: uuid.NewString()}
	tests := []struct {
		name  string
		q     domain.ListQuery
		index string
	}{
		{"All", domain.ListQuery{}, "orders_created"},
		{"Customer", domain.ListQuery{CustomerID: "c-1"}, "orders_customer_created"},
		{"Status", domain.ListQuery{Status: domain.StatusPending}, "orders_status_created"},
		{"CustomerAndStatus", domain.ListQuery{CustomerID: "c-1", Status: domain.StatusCancelled}, "orders_customer_status_created"},
	}
	for _, tt := range tests {
		for _, cursor := range []*domain.Cursor{nil, after} {
			q := tt.q
			q.Limit, q.After = 20, cursor
			name := tt.name + map[bool]string{true: "FirstPage", false: "LaterPage"}[cursor == nil]
			t.Run(name, func(t *testing.T) {
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_sort = off", "SET LOCAL enable_bitmapscan = off"} {
					if _, err := tx.Exec(set); err != nil {
						t.Fatal(err)
					}
				}
				query, args := store.ListQuery(q)
				var lines []string
				if err := tx.Select(&lines, `EXPLAIN `+query, args...); err != nil {
					t.Fatalf("EXPLAIN: %v", err)
				}
				plan := strings.Join(lines, "\n")
				if !strings.Contains(plan, "Index Scan using "+tt.index+" on orders") || strings.Contains(plan, "Sort") || strings.Contains(plan, "Filter:") {
					t.Fatalf("plan of %s is not a sort-free, filter-free scan of %s:\n%s", query, tt.index, plan)
				}
			})
		}
	}
}
