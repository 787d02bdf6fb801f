package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/pkg/broker"
)

// connectServices are the services whose outbox Debezium publishes with
// OUTBOX_RELAY=debezium (the tracker has none).
var connectServices = []string{"order", "payment", "inventory", "shipping"}

// connectRegister is `choreoctl connect-register`: it registers (or
// updates) one Debezium connector per service database, named by
// <SERVICE>_DATABASE_URL, on the Kafka Connect worker at -connect or
// $KAFKA_CONNECT_URL (scripts/infra.sh connect-register runs it), and waits
// until each runs: the services, started with OUTBOX_RELAY=debezium, then
// find their replication slots. It logs in to the worker's REST API as
// $KAFKA_CONNECT_USERNAME with the password in $KAFKA_CONNECT_PASSWORD_FILE,
// and writes each connector's passwords (its database's and its service's
// Kafka user's, <SERVICE>_KAFKA_PASSWORD_FILE) into
// $KAFKA_CONNECT_SECRETS_DIR, where the worker reads them.
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
	client, err := connect.Client(getenv("KAFKA_CONNECT_USERNAME"), getenv("KAFKA_CONNECT_PASSWORD_FILE"))
	if err != nil {
		return fmt.Errorf("connect-register: %w", err)
	}
	log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, service := range connectServices {
		p := strings.ToUpper(service)
		url := getenv(p + "_DATABASE_URL")
		if url == "" {
			return fmt.Errorf("connect-register: %s_DATABASE_URL is not set", p)
		}
		password, err := broker.Conn{Password: getenv(p + "_KAFKA_PASSWORD"), PasswordFile: getenv(p + "_KAFKA_PASSWORD_FILE")}.Secret()
		if err != nil || password == "" {
			return fmt.Errorf("connect-register: %s's Kafka password (%s_KAFKA_PASSWORD_FILE): %v", service, p, err)
		}
		secrets := connect.Secrets{Dir: getenv("KAFKA_CONNECT_SECRETS_DIR"), KafkaPassword: password}
		ctx, cancel := context.WithTimeout(ctx, *wait)
		c, err := connect.Start(ctx, client, *base, service, url, secrets, log)
		cancel()
		if err != nil {
			return fmt.Errorf("connect-register: %w", err)
		}
		fmt.Fprintf(out, "connect-register: %s runs, slot %s\n", c.Name, c.Config["slot.name"])
	}
	return nil
}
