package testenv

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/infra"
)

// Connect returns the base URL of the Kafka Connect worker that
// `scripts/infra.sh connect-up` runs (KAFKA_CONNECT_URL, as infra.sh env
// exports it). It fails the test, never skips it, when the test's Kafka is
// not the one infra.sh announced (the worker publishes there) or when no
// worker answers.
func Connect(t testing.TB) string {
	t.Helper()
	if mode := Infra(t).Mode; mode != infra.ModeEnvironment {
		t.Fatalf("a Kafka Connect test needs the Kafka and PostgreSQL of scripts/infra.sh, not %s ones: eval \"$(bash scripts/infra.sh up)\"; bash scripts/infra.sh connect-up", mode)
	}
	base := os.Getenv("KAFKA_CONNECT_URL")
	if base == "" {
		t.Fatal("KAFKA_CONNECT_URL is not set: eval \"$(bash scripts/infra.sh env)\"; bash scripts/infra.sh connect-up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/connectors", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no Kafka Connect worker answers at %s (%v): bash scripts/infra.sh connect-up", base, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Kafka Connect at %s answers %s", base, resp.Status)
	}
	return base
}
