package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/tracker"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/httpapi"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// getJSON GETs path and decodes a 200 body into v; it returns the status
// and the Content-Type.
func getJSON(t *testing.T, base, path string, v any) (int, string) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK && v != nil {
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: decode: %v", path, err)
		}
	}
	return res.StatusCode, res.Header.Get("Content-Type")
}

func TestSagas(t *testing.T) {
	ctx := context.Background()
	const sla = 30 * time.Second
	now := time.Now().UTC()
	db := testenv.DB(t, tracker.Schema)
	st := store.New(db, sla, func() time.Time { return now })
	srv := httptest.NewServer(testenv.As(testenv.Operator, httpapi.Routes(sla, func() time.Time { return now })(testenv.Logger(t), db, nil)))
	t.Cleanup(srv.Close)

	record := func(order, typ string, at time.Time) domain.Event {
		e := domain.Event{EventID: uuid.NewString(), OrderID: order, Type: typ, Service: "order", Topic: "order.events", At: at}
		if _, err := st.Record(ctx, e); err != nil {
			t.Fatalf("Record: %v", err)
		}
		return e
	}
	done, stuck := uuid.NewString(), []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	created := record(done, "OrderCreated", now.Add(-time.Second))
	completed := record(done, "OrderCompleted", now.Add(-time.Second/2))
	for i, id := range stuck {
		record(id, "OrderCreated", now.Add(-time.Hour+time.Duration(i)*time.Minute))
	}

	t.Run("OneSagaWithItsTimeline", func(t *testing.T) {
		var s struct {
			OrderID    string     `json:"order_id"`
			State      string     `json:"state"`
			StartedAt  time.Time  `json:"started_at"`
			EndedAt    *time.Time `json:"ended_at"`
			WaitingFor *string    `json:"waiting_for"`
			Events     []struct {
				Type, Service, Topic, EventID string
				At                            time.Time
			} `json:"events"`
		}
		if status, _ := getJSON(t, srv.URL, "/sagas/"+done, &s); status != http.StatusOK {
			t.Fatalf("status = %d", status)
		}
		if s.OrderID != done || s.State != "completed" || s.EndedAt == nil || s.WaitingFor != nil || len(s.Events) != 2 ||
			s.Events[0].Type != created.Type || s.Events[1].Type != completed.Type || s.StartedAt.Sub(created.At).Abs() > time.Microsecond /* PostgreSQL keeps microseconds, rounded */ {
			t.Fatalf("saga = %+v", s)
		}
	})
	t.Run("StuckSagaNamesTheStep", func(t *testing.T) {
		var s struct{ State, WaitingFor string }
		getJSON(t, srv.URL, "/sagas/"+stuck[0], &s)
		if s.State != "stuck" {
			t.Fatalf("state = %q, want stuck", s.State)
		}
	})
	t.Run("UnknownOrderIsNotFoundProblem", func(t *testing.T) {
		status, ct := getJSON(t, srv.URL, "/sagas/"+uuid.NewString(), nil)
		if status != http.StatusNotFound || ct != "application/problem+json" {
			t.Fatalf("status %d, Content-Type %q; want 404 problem+json", status, ct)
		}
	})
	t.Run("StuckListPagesByCursor", func(t *testing.T) {
		var got []string
		path := "/sagas?state=stuck&limit=2"
		for range 5 {
			var p struct {
				Sagas []struct {
					OrderID string `json:"order_id"`
				}
				NextCursor string `json:"next_cursor"`
			}
			if status, _ := getJSON(t, srv.URL, path, &p); status != http.StatusOK {
				t.Fatalf("GET %s = %d", path, status)
			}
			for _, s := range p.Sagas {
				got = append(got, s.OrderID)
			}
			if p.NextCursor == "" {
				break
			}
			path = "/sagas?state=stuck&limit=2&cursor=" + url.QueryEscape(p.NextCursor)
		}
		want := []string{stuck[2], stuck[1], stuck[0]} // newest first
		if !slices.Equal(got, want) {
			t.Fatalf("stuck = %v, want %v", got, want)
		}
	})
}
