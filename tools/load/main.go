// Command load drives a running system with orders and reports saga
// throughput and latency.
//
// It signs its tokens with the development key the services verify with
// (-dev-key-dir): an operator's for the accounts and stock, each
// customer's own for their orders.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/workload"
)

// Orders follow a seeded plan (internal/workload), and every saga must end
// the way its kind says. Saga latency is the order's own updated_at −
// created_at; throughput is ended sagas over the server's window. An open
// loop follows one order in twenty live and looks at the rest once it sent
// them all, so polling does not load what it measures. -sweep runs one
// open-loop step per rate and reports the highest sustained
// (docs/performance.md).
//
//	make run     # or: go run ./deploy/local
//	go run ./tools/load -rate 100 -duration 30s                 # open loop
//	go run ./tools/load -clients 16 -duration 30s               # closed loop
//	go run ./tools/load -sweep 50:400:50 -p99 1s -chart sweep.svg -out sweep.json
func main() {
	cli.Main("load", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// options are the command's flags.
type options struct {
	orderURL, paymentURL, inventoryURL string

	rate            float64
	clients         int
	duration, drain time.Duration
	maxInFlight     int
	customers, skus int
	mix             string
	seed            int64
	sweep           string
	p99             time.Duration
	out, chart      string
	progress        time.Duration
	keyDir          string
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.orderURL, "order", "http://127.0.0.1:8080", "order service")
	fs.StringVar(&o.paymentURL, "payment", "http://127.0.0.1:8081", "payment service")
	fs.StringVar(&o.inventoryURL, "inventory", "http://127.0.0.1:8082", "inventory service")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: orders per second, sent on schedule (0: closed loop with -clients)")
	fs.IntVar(&o.clients, "clients", 16, "closed loop: clients, each waiting for its saga to end before the next order")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long each step offers load")
	fs.DurationVar(&o.drain, "drain", 60*time.Second, "how long to wait after the load for sagas in flight")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 20000, "open loop: orders outstanding at most; sends past it are counted refused")
	fs.IntVar(&o.customers, "customers", 500, "customers the orders spread over (1: one hot customer)")
	fs.IntVar(&o.skus, "skus", 200, "SKUs the orders spread over (1: one hot SKU)")
	fs.StringVar(&o.mix, "mix", "default", `orders built to compensate, in percent: "declined=7,out-of-stock=7,unserved=6" ("default"), "" for none`)
	fs.Int64Var(&o.seed, "seed", 1, "seed of the order plan")
	fs.StringVar(&o.sweep, "sweep", "", `open-loop rates to step through, "from:to:step" (e.g. 50:400:50)`)
	fs.DurationVar(&o.p99, "p99", time.Second, "-sweep: the p99 saga latency a rate must stay under to count as sustained")
	fs.StringVar(&o.out, "out", "", "write the result as JSON to this file")
	fs.StringVar(&o.chart, "chart", "", "-sweep: write an SVG chart of throughput and p50/p99 against offered rate")
	fs.DurationVar(&o.progress, "progress", 2*time.Second, "progress line interval on stderr (0: none)")
	fs.StringVar(&o.keyDir, "dev-key-dir", "", "`dir` of the development token key pair the services verify with (default: $CHOREO_DEV_KEY_DIR, else ~/.cache/choreo/dev-key)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.rate < 0 || o.clients < 1:
		return o, errors.New("-rate must be >= 0 and -clients >= 1")
	case o.duration <= 0:
		return o, errors.New("-duration must be positive")
	case o.chart != "" && o.sweep == "":
		return o, errors.New("-chart needs -sweep")
	}
	return o, nil
}

// Result is what -out writes.
type Result struct {
	Started   time.Time    `json:"started"`
	Args      []string     `json:"args"`
	Customers int          `json:"customers"`
	SKUs      int          `json:"skus"`
	Mix       workload.Mix `json:"mix"`
	Seed      int64        `json:"seed"`
	Steps     []StepResult `json:"steps"`
	// Sweep only: the highest offered rate sustained under P99BoundMS.
	P99BoundMS    float64 `json:"p99_bound_ms,omitempty"`
	BestSustained float64 `json:"best_sustained_rate,omitempty"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.keyDir == "" {
		if o.keyDir, err = devkey.Dir(getenv); err != nil {
			return err
		}
	}
	key, err := devkey.Open(o.keyDir)
	if err != nil {
		return err
	}
	mix, err := workload.ParseMix(o.mix)
	if err != nil {
		return err
	}
	var rates []float64
	if o.sweep != "" {
		if rates, err = parseSweep(o.sweep); err != nil {
			return err
		}
	}

	// A fresh world per run, so runs never share balances or stock.
	prefix := "load-" + uuid.NewString()[:8]
	world := workload.NewWorld(prefix, o.customers, o.skus)
	// Good for a day: longer than any sweep.
	tokens, err := workload.NewTokens(key, "load", world, 24*time.Hour)
	if err != nil {
		return err
	}
	a := newAPI(o.orderURL, o.paymentURL, o.inventoryURL, tokens)
	fmt.Fprintln(stderr, setupLine(world, prefix))
	if err := a.setup(ctx, world); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	l := &Loader{api: a, planner: workload.NewPlanner(o.seed, prefix, world, mix), progress: o.progress, log: stderr, polls: make(chan struct{}, 64)}
	res := Result{Started: time.Now().UTC(), Args: args, Customers: o.customers, SKUs: o.skus, Mix: mix, Seed: o.seed}

	steps := []Step{{Open: o.rate > 0, Rate: o.rate, Clients: o.clients}}
	if rates != nil {
		steps = steps[:0]
		for _, r := range rates {
			steps = append(steps, Step{Open: true, Rate: r})
		}
	}
	behind := 0 // sweep steps in a row not sustained
	for _, st := range steps {
		st.Duration, st.Drain, st.MaxInFlight = o.duration, o.drain, o.maxInFlight
		r := l.Run(ctx, st)
		fmt.Fprintln(stdout, r.Line())
		res.Steps = append(res.Steps, r)
		if ctx.Err() != nil {
			break
		}
		// Two steps in a row past the knee draw the curve; more only
		// queue up work the system cannot do.
		if behind = map[bool]int{true: 0, false: behind + 1}[sustained(r, float64(o.p99.Microseconds())/1000)]; rates != nil && behind == 2 {
			fmt.Fprintln(stderr, "[load] two rates in a row not sustained; the sweep stops here")
			break
		}
	}
	if rates != nil {
		res.P99BoundMS = float64(o.p99.Microseconds()) / 1000
		res.BestSustained = best(res.Steps, res.P99BoundMS)
		fmt.Fprintf(stdout, "highest rate sustained with p99 under %s: %s orders/s\n", o.p99, trim(res.BestSustained))
	}
	if err := write(o.out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}); err != nil {
		return err
	}
	title := fmt.Sprintf("choreo sweep %s: %d customers, %d SKUs, mix %s", res.Started.Format("2006-01-02 15:04"), o.customers, o.skus, strings.ReplaceAll(o.mix, ",", " "))
	if err := write(o.chart, func(w io.Writer) error { return chart(w, title, res.Steps, res.P99BoundMS) }); err != nil {
		return err
	}
	for _, s := range res.Steps {
		if s.Unexpected > 0 {
			return fmt.Errorf("%d sagas ended otherwise than planned, e.g. %s", s.Unexpected, strings.Join(s.Examples, "; "))
		}
	}
	return ctx.Err()
}

// setupLine says what a run sets up, in the terms of its flags: the
// -customers and -skus the happy orders spread over, and apart from them
// the few a declined or out-of-stock order is sent to.
func setupLine(w workload.World, prefix string) string {
	return fmt.Sprintf("[load] setting up %d customers and %d SKUs, plus %d customers who cannot pay and %d SKUs out of stock for the orders built to compensate (%s)",
		len(w.Rich), len(w.Stocked), len(w.Poor), len(w.Empty), prefix)
}

// write creates path and fills it with f; nothing when path is empty.
func write(path string, f func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(file); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return file.Close()
}
