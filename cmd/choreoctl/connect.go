package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
)

// connectServices are the services whose outbox Debezium publishes with
// OUTBOX_RELAY=debezium (the tracker has none).
var connectServices = []string{"order", "payment", "inventory", "shipping"}

// connectRegister is `choreoctl connect-register`: it registers (or
// updates) one Debezium connector per service database, named by
// <SERVICE>_DATABASE_URL, on the Kafka Connect worker at -connect or
// $KAFKA_CONNECT_URL (scripts/infra.sh connect-register runs it), and waits
// until each runs: the services, started with OUTBOX_RELAY=debezium, then
// find their replication slots.
func connectRegister(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("choreoctl connect-register", flag.ContinueOnError)
	fs.SetOutput(errOut)
	base := fs.String("connect", getenv("KAFKA_CONNECT_URL"), "the Kafka Connect worker's REST `URL` (default $KAFKA_CONNECT_URL)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for each connector to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" {
		return fmt.Errorf("connect-register: no worker: set -connect or KAFKA_CONNECT_URL")
	}
	log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, service := range connectServices {
		url := getenv(strings.ToUpper(service) + "_DATABASE_URL")
		if url == "" {
			return fmt.Errorf("connect-register: %s_DATABASE_URL is not set", strings.ToUpper(service))
		}
		ctx, cancel := context.WithTimeout(ctx, *wait)
		c, err := connect.Start(ctx, http.DefaultClient, *base, service, url, log)
		cancel()
		if err != nil {
			return fmt.Errorf("connect-register: %w", err)
		}
		fmt.Fprintf(out, "connect-register: %s runs, slot %s\n", c.Name, c.Config["slot.name"])
	}
	return nil
}
