package testenv

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/infra"
)

// ConnectWorker is the Kafka Connect worker `scripts/infra.sh connect-up`
// runs, as infra.sh env exports it.
type ConnectWorker struct {
	// URL is its REST API's base URL (KAFKA_CONNECT_URL).
	URL string
	// Client logs in to the REST API (KAFKA_CONNECT_USERNAME,
	// KAFKA_CONNECT_PASSWORD_FILE).
	Client *http.Client
	// SecretsDir is where its connectors' secrets files go
	// (KAFKA_CONNECT_SECRETS_DIR, see connect.Secrets).
	SecretsDir string
}

// Connect returns the worker. It fails the test, never skips it, when the
// test's Kafka is not the one infra.sh announced (the worker publishes
// there) or when no worker answers.
func Connect(t testing.TB) ConnectWorker {
	t.Helper()
	if mode := Infra(t).Mode; mode != infra.ModeEnvironment {
		t.Fatalf("a Kafka Connect test needs the Kafka and PostgreSQL of scripts/infra.sh, not %s ones: eval \"$(bash scripts/infra.sh up)\"; bash scripts/infra.sh connect-up", mode)
	}
	w := ConnectWorker{URL: os.Getenv("KAFKA_CONNECT_URL"), SecretsDir: os.Getenv("KAFKA_CONNECT_SECRETS_DIR")}
	if w.URL == "" || w.SecretsDir == "" {
		t.Fatal("KAFKA_CONNECT_URL or KAFKA_CONNECT_SECRETS_DIR is not set: eval \"$(bash scripts/infra.sh env)\"; bash scripts/infra.sh connect-up")
	}
	client, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), os.Getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	w.Client = client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/connectors", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		t.Fatalf("no Kafka Connect worker answers at %s (%v): bash scripts/infra.sh connect-up", w.URL, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Kafka Connect at %s answers %s", w.URL, resp.Status)
	}
	return w
}
