// Command chaos is Choreo's Jepsen-style chaos suite: it runs two instances
// of every service on a 3-broker Kafka cluster, injects seeded faults while
// orders flow, and checks that no accepted order was lost, no effect
// doubled and the services agree.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/workload"
)

// Usage:
//
//	go run ./tools/chaos -short                 # the CI profile, ~4 minutes
//	go run ./tools/chaos -orders 10000 -rate 25 # a full run
//	go run ./tools/chaos -defaults              # one instance each, no instance ids
//	go run ./tools/chaos -rolling               # a rolling restart with orders flowing
//	go run ./tools/chaos -short -relay debezium # Debezium publishes; its worker killed and frozen
//
// The last line is `chaos: lost=N doubled=N inconsistent=N unproven=N
// terminal=X/Y`, and the exit status is non-zero unless every order, the
// rest after the drain and every scheduled fault is proven (docs/chaos.md).
// Each run starts its infrastructure afresh on ports it checked free, never
// the shared 9092/5432, and removes it unless -keep.
func main() {
	cli.Main("chaos", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}

// options are the command line.
type options struct {
	seed               int64
	orders             int
	duration           time.Duration
	rate               float64
	customers, skus    int
	out, dir, infraDir string
	rev                string
	keep, short        bool
	defaults, rolling  bool
	maxStall           time.Duration
	drain              time.Duration
	kafkaPort, pgPort  int
	connectPort        int
	// relay is the services' OUTBOX_RELAY: builtin, or debezium with a
	// Kafka Connect worker of the run's own.
	relay             string
	portBase          int
	crashEvery, pause time.Duration
	budget            Budget
	// fixedInfra: -infra-dir or a port was given, so the run uses them as
	// they are instead of a fresh state dir and ports checked free.
	fixedInfra bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&o.seed, "seed", 1, "seed of the fault schedule and the order mix")
	fs.IntVar(&o.orders, "orders", 0, "orders to send (default: -duration × -rate)")
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long to send orders, if -orders is not set")
	fs.Float64Var(&o.rate, "rate", 10, "orders per second, open loop")
	fs.IntVar(&o.customers, "customers", 200, "customers that can pay (plus a tenth as many that cannot)")
	fs.IntVar(&o.skus, "skus", 100, "SKUs in stock (plus a tenth as many out of stock)")
	fs.StringVar(&o.out, "out", "", "write the JSON report here (default DIR/report.json)")
	fs.StringVar(&o.dir, "dir", "", "output dir: binaries, service logs, report (default a new dir under $TMPDIR)")
	fs.StringVar(&o.infraDir, "infra-dir", "", "CHOREO_INFRA_DIR of the suite's own Kafka and PostgreSQL, to reuse (default a new dir under $TMPDIR, removed at the end unless -keep)")
	fs.StringVar(&o.rev, "rev", "", "build the services from this git revision (e.g. HEAD) instead of the working tree")
	fs.BoolVar(&o.keep, "keep", false, "leave Kafka and PostgreSQL running at the end (reuse them with the -infra-dir and ports printed)")
	fs.BoolVar(&o.short, "short", false, "the CI profile: 420 orders at 6/s, every fault kind once, ~4 minutes")
	fs.DurationVar(&o.drain, "drain", 3*time.Minute, "give up waiting for the orders to finish after this")
	first := slot(0)
	fs.IntVar(&o.kafkaPort, "kafka-port", first.Kafka, "first broker's port (nodes step by 2, controllers on +1; default: the first free set of ports)")
	fs.IntVar(&o.pgPort, "pg-port", first.PG, "PostgreSQL's port (default: the first free set of ports)")
	fs.IntVar(&o.connectPort, "connect-port", first.Connect, "the Kafka Connect worker's REST port with -relay debezium (default: the first free set of ports)")
	fs.StringVar(&o.relay, "relay", RelayBuiltin, "what publishes the outboxes: builtin (each service's relay) or debezium (a Kafka Connect worker; its kill -9 and SIGSTOP take the place of the relay leader's pause)")
	fs.IntVar(&o.portBase, "port-base", first.HTTP, "HTTP port of order-1; service s instance i listens on base+s+100(i-1) (default: the first free set of ports)")
	fs.DurationVar(&o.crashEvery, "crash-every", 3*time.Second, "period of the crash loop")
	fs.DurationVar(&o.pause, "pause", 16*time.Second, "how long a SIGSTOP lasts (past relay takeover and the session timeout; 15s with -defaults)")
	fs.BoolVar(&o.defaults, "defaults", false, "the services' default configuration: one instance each, no KAFKA_GROUP_INSTANCE_ID; faults: a crash loop, a freeze beside a started twin, a broker kill")
	fs.BoolVar(&o.rolling, "rolling", false, "instead of the faults, a rolling restart of every instance (SIGTERM one at a time, the next 2s after the replacement is ready)")
	fs.IntVar(&o.budget.Refused, "max-refused", 0, "planned orders that may be refused with a 4xx (every planned kind is valid)")
	fs.IntVar(&o.budget.Unsettled, "max-unsettled", -1, "planned orders that may stay unanswered, checked within bounds (default 0.5% of -orders, at least 1)")
	fs.DurationVar(&o.maxStall, "max-stall", 0, "with -defaults or -rolling, fail the run if its stall exceeds this (default: compare it with 15s or 5s, never fail on it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.fixedInfra = set["infra-dir"] || set["kafka-port"] || set["pg-port"] || set["port-base"] || set["connect-port"]
	if o.relay != RelayBuiltin && o.relay != RelayDebezium {
		return o, fmt.Errorf("-relay must be %s or %s, not %q", RelayBuiltin, RelayDebezium, o.relay)
	}
	if o.short {
		if !set["orders"] && !set["duration"] {
			o.orders = 420
			if o.relay == RelayDebezium {
				// The worker's faults wait for the failpoint window,
				// and need orders flowing after it (docs/chaos.md).
				o.orders = 600
			}
		}
		if !set["rate"] {
			o.rate = 6
		}
		if !set["customers"] {
			o.customers = 60
		}
		if !set["skus"] {
			o.skus = 30
		}
		if !set["drain"] {
			o.drain = 90 * time.Second
			if o.relay == RelayDebezium {
				// A killed worker's backlog, published at once.
				o.drain = 3 * time.Minute
			}
		}
	}
	if o.defaults && !set["pause"] {
		o.pause = 15 * time.Second
	}
	if o.maxStall > 0 && !o.defaults && !o.rolling {
		return o, fmt.Errorf("-max-stall needs -defaults or -rolling")
	}
	if o.rate <= 0 {
		return o, fmt.Errorf("-rate must be positive")
	}
	if o.orders <= 0 {
		o.orders = int(o.duration.Seconds() * o.rate)
	}
	if o.budget.Unsettled < 0 {
		o.budget.Unsettled = max(1, o.orders/200)
	}
	if o.customers < 2 || o.skus < 2 {
		return o, fmt.Errorf("-customers and -skus must be at least 2")
	}
	return o, nil
}

// rereadAfter is the pause between the two reads at rest, long enough
// for a relay round and a consumer commit to show.
const rereadAfter = 3 * time.Second

// errViolations is returned when the checker found something.
var errViolations = errors.New("the checker found violations")

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	o, err := parse(args, os.Stderr)
	if err != nil {
		return err
	}
	t0 := time.Now()
	tag := strconv.FormatInt(o.seed, 10) + "-" + strconv.FormatInt(t0.Unix()%1_000_000, 36)
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "chaos-"+tag+"-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(o.dir, "report.json")
	}
	logFile, err := os.Create(filepath.Join(o.dir, "chaos.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, logFile), nil))
	repo, err := repoRoot()
	if err != nil {
		return err
	}

	load := time.Duration(float64(o.orders) / o.rate * float64(time.Second))
	Instances = o.instances()
	sched, err := o.schedule(load)
	if err != nil {
		return err
	}
	world := NewWorld(tag, o.customers, o.skus)
	reqs := Plan(o.seed, tag, o.orders, world)
	log.Info("chaos run", "seed", o.seed, "tag", tag, "orders", o.orders, "rate", o.rate, "load", load, "faults", len(sched), "dir", o.dir)

	rep := &Report{Seed: o.seed, Tag: tag, Started: t0, Dir: o.dir, Schedule: sched,
		Config: Settings{Orders: o.orders, Rate: o.rate, Customers: o.customers, SKUs: o.skus, Short: o.short,
			Profile: o.profile(), Instances: Instances, Relay: o.relay}, Budget: o.budget}
	// Whatever happens, the report (as far as it got) is printed and written.
	defer func() {
		rep.Wall = Duration(time.Since(t0))
		rep.tally()
		if err != nil && !errors.Is(err, errViolations) {
			rep.Error = err.Error()
		}
		rep.Print(stdout)
		if werr := rep.WriteJSON(o.out); werr != nil {
			log.Error("writing the report", "err", werr)
		} else {
			log.Info("report written", "path", o.out)
		}
	}()

	// Infrastructure, binaries, the cluster. Cleanup runs on a context
	// that Ctrl-C does not cancel.
	cleanup := context.WithoutCancel(ctx)
	const nodes = 3
	fresh, release, err := placeInfra(&o, nodes)
	if err != nil {
		return err
	}
	defer release()
	infra := &Infra{Repo: repo, Dir: o.infraDir, KafkaPort: o.kafkaPort, PGPort: o.pgPort, ConnectPort: o.connectPort, Nodes: nodes, log: log}
	defer func() { endInfra(cleanup, log, infra, o, fresh, err) }()
	if err := infra.Up(ctx); err != nil {
		return err
	}
	// With Debezium the worker and its connectors run before the services
	// start: a service writes its outbox only once its slot exists. The
	// services build meanwhile.
	type built struct {
		bins map[string]string
		err  error
	}
	building := make(chan built, 1)
	go func() {
		bins, err := Build(ctx, log, repo, o.rev, o.dir)
		building <- built{bins, err}
	}()
	var worker *Worker
	if o.relay == RelayDebezium {
		worker, err = StartWorker(ctx, log, infra)
	}
	b := <-building
	if err = errors.Join(err, b.err); err != nil {
		return err
	}
	bins := b.bins
	infra.Env = append(infra.Env, "OUTBOX_RELAY="+o.relay)
	from, err := NewestOffsets(ctx, infra.Kafka)
	if err != nil {
		return err
	}
	// The services verify tokens with a key of the run's own, which
	// signs the operator's and every customer's (good for longer than
	// any run).
	key, err := devkey.Open(filepath.Join(o.dir, "dev-key"))
	if err != nil {
		return err
	}
	tokens, err := workload.NewTokens(key, "chaos", world, 48*time.Hour)
	if err != nil {
		return err
	}
	cluster, err := StartCluster(ctx, log, ClusterConfig{Bins: bins, Dir: o.dir, PortBase: o.portBase,
		Brokers: joinComma(infra.Kafka.Brokers), Users: infra.Users, Databases: infra.Databases, ExtraEnv: append(infra.Env, key.Env()...), DerivedIDs: o.defaults})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping the services")
		cluster.Stop()
	}()
	a := newAPI(tokens)
	if err := Setup(ctx, a, cluster, world); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	log.Info("world set up", "customers", len(world.Balance), "skus", len(world.Stock))

	// Load, faults and the observer, together.
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	obs := &Observer{}
	go obs.Watch(obsCtx, cluster, 250*time.Millisecond)
	// The duplicate counters are followed until the system is at rest,
	// when every copy a duplicating pass made has been consumed.
	dups := NewDupCounter(cluster)
	inj := &Injector{Cluster: cluster, Infra: infra, From: from, Log: log, Failpoints: FailpointsFor(o.short, o.relay), Dups: dups, Worker: worker, Load: load}
	start := time.Now()
	rep.LoadStart = Duration(start.Sub(t0))
	injected := make(chan []Injected, 1)
	go func() { injected <- runSchedule(ctx, inj, start, sched) }()
	placed, stats := Load(ctx, log, a, cluster, reqs, o.rate, 2*time.Minute)
	loadEnd := start.Add(stats.Elapsed)
	rep.Load = stats
	rep.Injected = <-injected
	if err := ctx.Err(); err != nil {
		return err
	}
	lastFault := start
	for _, in := range rep.Injected {
		if in.End.After(lastFault) {
			lastFault = in.End
		}
	}
	log.Info("faults over; waiting for every instance to be up", "faults", len(rep.Injected))
	if err := cluster.WaitReady(ctx, time.Minute); err != nil {
		return err
	}

	// Drain, read, check.
	exp := Expectation{Requests: map[string]Request{}, Accepted: map[string][]string{},
		InitialBalance: world.Balance, InitialStock: world.Stock, ReplayRefused: map[string]string{},
		Refused: map[string]string{}, Planned: len(reqs), Budget: o.budget}
	for i, p := range placed {
		exp.Requests[p.Key] = reqs[i]
		switch {
		case len(p.IDs) > 0:
			exp.Accepted[p.Key] = p.IDs
		case p.Rejected != "":
			exp.Refused[p.Key] = p.Rejected
		default:
			exp.Unsettled = append(exp.Unsettled, p.Key)
		}
		if p.ReplayRefused != "" {
			exp.ReplayRefused[p.Key] = p.ReplayRefused
		}
	}
	var ids []string
	for _, k := range sortedKeys(exp.Accepted) {
		ids = append(ids, exp.Accepted[k]...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	log.Info("draining", "orders", len(ids), "limit", o.drain)
	lastDone, left := Drain(ctx, log, a, cluster, ids, o.drain)
	stopObs()
	rep.Drain = Duration(max(0, lastDone.Sub(lastFault)))
	rep.DrainAfterLoad = Duration(max(0, lastDone.Sub(loadEnd)))
	finishes := obs.Finishes()
	if from, to, ok := CrashWindow(sched, o.crashEvery); ok {
		rep.CrashWindow = Duration(to - from)
		d, _ := LongestStall(finishes, start.Add(from), start.Add(to))
		rep.CrashStall = Duration(d)
	}
	d, at := LongestStall(finishes, start, loadEnd)
	rep.LoadStall, rep.LoadStallAt = Duration(d), Duration(at.Sub(start))
	rep.Bounds = o.bounds(rep.Injected, finishes, obs.Completions(), start, loadEnd)
	rep.Exits = cluster.ExitsByCause()
	rep.tally()
	// At rest: nothing left in an outbox or behind a consumer group, so
	// that a late duplicate is in the reads; then two reads, which must
	// agree.
	rep.Rest = WaitAtRest(ctx, infra.Kafka, infra.Databases, time.Minute)
	log.Info("at rest", "reached", rep.Rest.Reached, "waited", rep.Rest.Waited, "outbox", rep.Rest.Outbox, "lag", rep.Rest.Lag, "err", rep.Rest.Err)
	counted := dups.Totals(ctx)
	rep.Duplicates = counted
	for n := range rep.Injected {
		if in := &rep.Injected[n]; in.Kind == KindDuplicate && in.Fired && rep.Rest.Reached {
			in.Counted = map[string]int{}
			for _, s := range Services {
				in.Counted[s] = counted[s] - in.countedFrom[s]
			}
		}
	}
	rep.tally()
	log.Info("reading every service", "orders", len(ids), "left_pending", left)
	first, err := Read(ctx, a, cluster, ids, world)
	if err != nil {
		return fmt.Errorf("reading the services: %w", err)
	}
	sleep(ctx, rereadAfter)
	log.Info("reading every service again")
	snap, err := Read(ctx, a, cluster, ids, world)
	if err != nil {
		return fmt.Errorf("reading the services again: %w", err)
	}
	snap.Earlier, snap.Rest = &first, rep.Rest
	rep.Verdict = Check(exp, snap)
	if !rep.Verdict.OK() {
		return errViolations
	}
	if err := exceeded(rep.Bounds); err != nil && o.maxStall > 0 {
		return err
	}
	// Every fault and crash point is meant to happen: one that silently
	// did nothing, or less than planned, must not pass.
	return rep.Proven()
}

// repoRoot finds the module root (where go.mod is) from the working
// directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "infra.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run from inside the choreo repository (no go.mod with scripts/infra.sh above %s)", dir)
		}
		dir = parent
	}
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
