// Command outbox compares three ways of moving transactional-outbox rows to
// Kafka (choreo's relay, a naive poller and Watermill's SQL forwarder) over
// the same PostgreSQL and Kafka, in one run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/pkg/broker"
)

// Two figures per contender: drain (how fast a backlog of -rows rows
// reaches Kafka) and trickle (latency from a row's commit to its arrival at
// a consumer, rows committed one by one at -rate per second). The ratios
// between contenders of one run are the result. It uses a database per
// contender (bench_relay, …), created next to the one in -db and dropped
// first if present.
//
//	eval "$(bash scripts/infra.sh up)"
//	cd bench && go run ./outbox -rows 20000 -rate 200 -trickle 10s
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outbox bench:", err)
		os.Exit(1)
	}
}

// contender is one way of moving outbox rows to Kafka.
type contender interface {
	// Name names it in the report and its database.
	Name() string
	// Prepare creates its tables in db (a fresh database).
	Prepare(ctx context.Context, env *env) error
	// Insert commits rows [from, to) for topic in one transaction: many
	// for the backlog, one alone as a service's transaction would.
	Insert(ctx context.Context, topic string, from, to int) error
	// Run moves rows to Kafka until ctx ends.
	Run(ctx context.Context) error
}

// result is one contender's figures.
type result struct {
	name        string
	drainPerSec float64
	p50, p99    time.Duration
	trickled    int
	// walPerRow and cpuPerRow are what PostgreSQL spent per row over the
	// trickle (cost.go).
	walPerRow float64
	cpuPerRow time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	db := fs.String("db", os.Getenv("TEST_DATABASE_URL"), "a PostgreSQL URL; each contender gets a database of its own next to it")
	brokers := fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka brokers, comma-separated")
	rows := fs.Int("rows", 20000, "drain: rows in the backlog")
	rate := fs.Float64("rate", 200, "trickle: rows committed per second")
	trickle := fs.Duration("trickle", 10*time.Second, "trickle: how long")
	only := fs.String("only", "relay,naive,watermill", "contenders to run, comma-separated (and debezium, which needs a Kafka Connect worker: scripts/infra.sh connect-up)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" || *brokers == "" {
		return errors.New(`need -db and -brokers (or TEST_DATABASE_URL and KAFKA_BROKERS: eval "$(bash scripts/infra.sh up)")`)
	}
	conn, err := cli.Kafka(*brokers, os.Getenv) // credentials: KAFKA_USERNAME, KAFKA_PASSWORD(_FILE)
	if err != nil {
		return err
	}
	all := []contender{&relayContender{}, &debeziumContender{}, &naiveContender{}, &watermillContender{}}
	var results []result
	for _, c := range all {
		if !slices.Contains(strings.Split(*only, ","), c.Name()) {
			continue
		}
		fmt.Fprintf(out, "%s: ", c.Name())
		r, err := measure(ctx, c, *db, conn, *rows, *rate, *trickle)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		fmt.Fprintf(out, "drain %.0f rows/s; trickle p50 %s p99 %s (%d rows), PostgreSQL %.0f WAL bytes and %s CPU a row\n", r.drainPerSec,
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.trickled, r.walPerRow, r.cpuPerRow.Round(time.Microsecond))
		results = append(results, r)
	}
	report(out, results)
	return nil
}

// report prints each contender's figures as ratios to the first one.
func report(out io.Writer, rs []result) {
	if len(rs) < 2 {
		return
	}
	base := rs[0]
	fmt.Fprintf(out, "\n| contender | drain rows/s | × %s | trickle p50 | trickle p99 | p99 × %s | WAL bytes/row | PostgreSQL CPU/row |\n|---|---|---|---|---|---|---|---|\n", base.name, base.name)
	for _, r := range rs {
		fmt.Fprintf(out, "| %s | %.0f | %.2f | %s | %s | %.1f | %.0f | %s |\n", r.name, r.drainPerSec, r.drainPerSec/base.drainPerSec,
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), float64(r.p99)/float64(base.p99), r.walPerRow, r.cpuPerRow.Round(time.Microsecond))
	}
}

// measure runs both phases for c on a fresh database and topic.
func measure(ctx context.Context, c contender, baseURL string, kafka broker.Conn, rows int, rate float64, trickle time.Duration) (result, error) {
	e, err := newEnv(ctx, baseURL, "bench_"+c.Name(), c.Name(), kafka)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	if cl, ok := c.(interface{ Close() error }); ok {
		defer func() {
			if err := cl.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: close: %v\n", c.Name(), err)
			}
		}()
	}
	if err := c.Prepare(ctx, e); err != nil {
		return result{}, fmt.Errorf("prepare: %w", err)
	}
	r := result{name: c.Name()}

	// Drain: the backlog is committed first, then the contender starts.
	topic, err := e.topic(ctx, e.topics[0])
	if err != nil {
		return r, err
	}
	for from := 0; from < rows; from += 500 {
		if err := c.Insert(ctx, topic, from, min(from+500, rows)); err != nil {
			return r, fmt.Errorf("insert: %w", err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- c.Run(runCtx) }()
	if err := e.waitFor(ctx, topic, int64(rows), errc); err != nil {
		return r, fmt.Errorf("drain: %w", err)
	}
	r.drainPerSec = float64(rows) / time.Since(start).Seconds()

	// Trickle: the contender keeps running; rows arrive one by one.
	topic, err = e.topic(ctx, e.topics[1])
	if err != nil {
		return r, err
	}
	before, err := e.read(ctx)
	if err != nil {
		return r, err
	}
	lat, err := e.trickle(ctx, topic, rate, trickle, func(i int) error { return c.Insert(ctx, topic, i, i+1) }, errc)
	if err != nil {
		return r, fmt.Errorf("trickle: %w", err)
	}
	if r.walPerRow, r.cpuPerRow, err = e.costSince(ctx, before, len(lat)); err != nil {
		return r, err
	}
	slices.Sort(lat)
	r.trickled = len(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = lat[len(lat)/2], lat[(len(lat)*99)/100]
	}
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return r, fmt.Errorf("run: %w", err)
	}
	return r, nil
}
