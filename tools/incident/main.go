// Command incident replays the seed incident side by side: the same
// OrderCreated events, redelivered and delivered concurrently, go to a
// naive check-then-act payment consumer and to Choreo's payment handler,
// and the money taken is compared with the money owed.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/choreo-saga/choreo/internal/cli"
)

// It creates a topic and two PostgreSQL schemas of its own and removes them
// when it ends. It exits non-zero if Choreo's side ever charges an order
// twice, not at all, or takes more or less than owed, so it doubles as a
// check; the naive side is expected to overcharge.
//
//	eval "$(bash scripts/infra.sh env)"
//	go run ./tools/incident [-orders 200] [-seed 1] [-copies 3] [-concurrent 0.25] [-work 5ms]
func main() {
	cli.Main("incident", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("incident", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&cfg.Orders, "orders", cfg.Orders, "orders to create")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the orders, customers, amounts and which orders are delivered concurrently")
	fs.IntVar(&cfg.Copies, "copies", cfg.Copies, "handlers that receive a concurrently delivered event at once")
	fs.Float64Var(&cfg.ConcurrentShare, "concurrent", cfg.ConcurrentShare, "share of orders whose OrderCreated is delivered to -copies handlers at once")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "the naive consumer's work between its check and its write (a card processor's round trip)")
	brokers := fs.String("brokers", getenv("KAFKA_BROKERS"), "Kafka brokers (default $KAFKA_BROKERS or 127.0.0.1:9092)")
	dbURL := fs.String("database", firstNonEmpty(getenv("DATABASE_URL"), getenv("TEST_DATABASE_URL")),
		"PostgreSQL URL; the demo works in schemas of its own there (default $DATABASE_URL, else $TEST_DATABASE_URL)")
	verbose := fs.Bool("v", false, "log what the payment handler logs")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("no database: set DATABASE_URL or TEST_DATABASE_URL (eval \"$(bash scripts/infra.sh env)\"), or pass -database")
	}
	cfg.DatabaseURL = *dbURL
	kafka, err := cli.Kafka(*brokers, getenv)
	if err != nil {
		return err
	}
	cfg.Kafka = kafka
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(errOut, nil))
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := Run(ctx, cfg, out)
	if err != nil {
		return err
	}
	return rep.Check()
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
