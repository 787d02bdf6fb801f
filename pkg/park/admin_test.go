package park_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// TestRetryAnswersWhyARowIsRefusedAgain: under Debezium, a retry whose row
// the trigger refuses again answers 409 problem+json with the trigger's
// reason, and changes nothing; a row whose cause is fixed is retried, and
// one that is not refused is left alone, as before.
func TestRetryAnswersWhyARowIsRefusedAgain(t *testing.T) {
	db := debeziumOutbox(t, "svc.events")
	ctx := context.Background()
	add := func(topic string) int64 {
		t.Helper()
		if err := outbox.Add(ctx, db, outbox.Message{Topic: topic, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := db.GetContext(ctx, &id, `SELECT max(id) FROM outbox`); err != nil {
			t.Fatal(err)
		}
		return id
	}
	refused := add("nope.events") // the trigger refuses it: a topic the connector may not write
	fixed := add("svc.events")
	// Refused for a cause since fixed (its topic created).
	if _, err := db.ExecContext(ctx, `UPDATE outbox SET refused_at = now(), last_error = 'unknown topic' WHERE id = $1`, fixed); err != nil {
		t.Fatal(err)
	}
	log := testenv.Logger(t)
	srv := httptest.NewServer(park.Admin(park.NewOperator("svc", db, log, nil), db, log))
	defer srv.Close()

	for _, tc := range []struct {
		name    string
		id      int64
		want    int
		problem bool
		detail  []string // in a problem's detail
		retried bool
	}{
		{"RefusedAgainSaysWhy", refused, http.StatusConflict, true,
			[]string{"refused again, left as it was", `topic "nope.events" is not one this service's Debezium connector may write`}, false},
		{"FixedIsRetried", fixed, http.StatusOK, false, nil, true},
		{"NotRefusedIsLeftAlone", fixed + 1000, http.StatusOK, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/outbox/refused/"+strconv.FormatInt(tc.id, 10)+"/retry", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(park.AdminHeader, "test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("retry row %d = %d %v, want %d", tc.id, resp.StatusCode, body, tc.want)
			}
			if got := resp.Header.Get("Content-Type") == "application/problem+json"; got != tc.problem {
				t.Fatalf("content type %q, want problem+json: %v", resp.Header.Get("Content-Type"), tc.problem)
			}
			for _, d := range tc.detail {
				if got, _ := body["detail"].(string); !strings.Contains(got, d) {
					t.Errorf("detail %q does not say %q", got, d)
				}
			}
			if !tc.problem && body["retried"] != tc.retried {
				t.Errorf("answer %v, want retried %v", body, tc.retried)
			}
		})
	}
	// The refused retry changed nothing: the row is there, refused, with
	// its id.
	rows, err := outbox.ListRefused(ctx, db, 10)
	if err != nil || len(rows) != 1 || rows[0].ID != refused {
		t.Errorf("refused rows after the retries %+v, %v; want row %d only", rows, err, refused)
	}
}

// debeziumOutbox returns a database of its own whose outbox Debezium
// publishes, as a service's start on OUTBOX_RELAY=debezium leaves it, its
// connector allowed topics.
func debeziumOutbox(t *testing.T, topics ...string) *sqlx.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pg.Open(ctx, testenv.OwnDatabase(t), 10*time.Second)
	if err != nil {
		t.Fatalf("%v; %s", err, testenv.HowToStart)
	}
	t.Cleanup(func() { db.Close() })
	if err := pg.Migrate(ctx, db, testenv.Logger(t), outbox.Schema); err != nil {
		t.Fatal(err)
	}
	service := "park_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	slot := outbox.Slot(service)
	if _, err := db.ExecContext(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	// A slot holds WAL, and its database, for ever.
	t.Cleanup(func() {
		if _, err := db.Exec(`SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Error(err)
		}
	})
	_, closeFn, err := outbox.Start(ctx, outbox.StartConfig{Relay: outbox.RelayDebezium, Name: service, DB: db, Topics: topics, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return db
}
