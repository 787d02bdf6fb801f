package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// Infra drives scripts/infra.sh for the suite's own Kafka cluster and
// PostgreSQL, in their own state dir and on their own ports, so that the
// shared infrastructure (9092, 5432) is never touched.
type Infra struct {
	Repo      string
	Dir       string // CHOREO_INFRA_DIR
	KafkaPort int    // node I listens on KafkaPort+2(I-1), its controller on KafkaPort+1+2(I-1)
	PGPort    int
	// ConnectPort is the Kafka Connect worker's REST port (-relay debezium).
	ConnectPort int
	Nodes       int
	log         *slog.Logger

	// Filled by Up.
	Kafka     broker.Conn            // as the administrator
	Users     map[string]broker.Conn // service → its own user
	Databases map[string]string      // service → URL
	Env       []string               // KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS
	// Exported is everything infra.sh up exported, e.g. the Connect
	// worker's KAFKA_CONNECT_URL and REST credential.
	Exported map[string]string
}

// env is the environment every infra.sh command of this cluster gets.
func (in *Infra) env() []string {
	env := append(os.Environ(),
		"CHOREO_INFRA_DIR="+in.Dir,
		"KAFKA_BROKERS_COUNT="+strconv.Itoa(in.Nodes),
		"KAFKA_PORT="+strconv.Itoa(in.KafkaPort),
		"KAFKA_CONTROLLER_PORT="+strconv.Itoa(in.KafkaPort+1),
		"PGPORT="+strconv.Itoa(in.PGPort),
		"CONNECT_PORT="+strconv.Itoa(in.ConnectPort),
	)
	if os.Getenv("KAFKA_LIBS_DIR") == "" {
		home, _ := os.UserHomeDir()
		shared := filepath.Join(home, ".cache", "choreo-infra", "kafka-4.1.1", "libs")
		if _, err := os.Stat(filepath.Join(shared, ".complete")); err == nil {
			env = append(env, "KAFKA_LIBS_DIR="+shared) // reuse the jars, download nothing
		}
	}
	return env
}

// script runs infra.sh with args; its progress (stderr) goes to the
// suite's infra log, its stdout is returned.
func (in *Infra) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(in.Repo, "scripts", "infra.sh")}, args...)...)
	cmd.Env = in.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	t0 := time.Now()
	err := cmd.Run()
	if f, ferr := os.OpenFile(filepath.Join(in.Dir, "chaos-infra.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		fmt.Fprintf(f, "=== infra.sh %s (%s, err %v)\n%s", strings.Join(args, " "), time.Since(t0).Round(time.Millisecond), err, stderr.String())
		f.Close()
	}
	if err != nil {
		return "", fmt.Errorf("infra.sh %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 70))
	}
	in.log.Debug("infra.sh", "args", args, "took", time.Since(t0).Round(time.Millisecond))
	return stdout.String(), nil
}

// Up starts (or finds running) the cluster and PostgreSQL and reads the
// addresses infra.sh exports.
func (in *Infra) Up(ctx context.Context) error {
	if err := os.MkdirAll(in.Dir, 0o755); err != nil {
		return err
	}
	t0 := time.Now()
	in.log.Info("starting infrastructure", "dir", in.Dir, "kafka_nodes", in.Nodes, "kafka_port", in.KafkaPort, "pg_port", in.PGPort)
	out, err := in.script(ctx, "up")
	if err != nil {
		return err
	}
	in.Databases = map[string]string{}
	exported := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if !ok {
			continue
		}
		exported[name] = val
		switch {
		case name == "KAFKA_REPLICATION_FACTOR" || name == "KAFKA_MIN_INSYNC_REPLICAS":
			in.Env = append(in.Env, name+"="+val)
		case strings.HasSuffix(name, "_DATABASE_URL"):
			in.Databases[strings.ToLower(strings.TrimSuffix(name, "_DATABASE_URL"))] = val
		}
	}
	in.Exported = exported
	getenv := func(name string) string { return exported[name] }
	if in.Kafka, err = broker.FromEnv(getenv); err != nil {
		return fmt.Errorf("infra.sh up: %w", err)
	}
	in.Users = map[string]broker.Conn{}
	for _, s := range Services {
		if in.Databases[s] == "" {
			return fmt.Errorf("infra.sh up exported no %s database", s)
		}
		p := strings.ToUpper(s) + "_KAFKA_"
		if getenv(p+"USERNAME") == "" {
			return fmt.Errorf("infra.sh up exported no Kafka user for %s", s)
		}
		in.Users[s] = in.Kafka.As(getenv(p+"USERNAME"), "", getenv(p+"PASSWORD_FILE"))
	}
	if len(in.Kafka.Brokers) != in.Nodes {
		return fmt.Errorf("infra.sh up exported %d brokers, want %d", len(in.Kafka.Brokers), in.Nodes)
	}
	in.log.Info("infrastructure up", "took", time.Since(t0).Round(time.Second), "brokers", strings.Join(in.Kafka.Brokers, ","), "env", in.Env)
	return nil
}

// Down stops the cluster and PostgreSQL of this state dir.
func (in *Infra) Down(ctx context.Context) error {
	_, err := in.script(ctx, "down")
	return err
}

// KillNode kills broker node (its node id) with SIGKILL.
func (in *Infra) KillNode(ctx context.Context, node int32) error {
	_, err := in.script(ctx, "kafka-kill-node", strconv.Itoa(int(node)))
	return err
}

// StartNode starts broker node again and waits until it serves requests.
func (in *Infra) StartNode(ctx context.Context, node int32) error {
	_, err := in.script(ctx, "kafka-start-node", strconv.Itoa(int(node)))
	return err
}

// RestartPG restarts PostgreSQL (fast shutdown, sessions cut).
func (in *Infra) RestartPG(ctx context.Context) error {
	_, err := in.script(ctx, "pg-restart")
	return err
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// placeInfra decides where the run's infrastructure lives. By default it
// is a new state dir under $TMPDIR and the first set of ports that no
// other run claims and nothing listens on (see FreePorts): a state dir an
// earlier run left behind, or another run on the same machine, cannot get
// in the way. -infra-dir or any port flag fixes the place as given, e.g.
// to reuse a cluster kept with -keep. fresh reports a new state dir;
// release gives the ports' claim back.
func placeInfra(o *options, nodes int) (fresh bool, release func(), err error) {
	if o.fixedInfra {
		if o.infraDir == "" {
			o.infraDir = filepath.Join(os.TempDir(), "choreo-chaos-infra")
		}
		return false, func() {}, nil
	}
	p, release, err := FreePorts(nodes)
	if err != nil {
		return false, nil, err
	}
	o.kafkaPort, o.pgPort, o.portBase, o.connectPort = p.Kafka, p.PG, p.HTTP, p.Connect
	if o.infraDir, err = os.MkdirTemp("", "choreo-chaos-infra-"); err != nil {
		release()
		return false, nil, err
	}
	return true, release, nil
}

// endInfra ends the run's infrastructure: unless -keep, it stops it and,
// if the run made the state dir, removes it, first copying its logs
// (Kafka's, PostgreSQL's, infra.sh's) next to the services' when the run
// failed (runErr), so that nothing needed to see why is lost. With -keep
// it logs the flags that reuse it.
func endInfra(ctx context.Context, log *slog.Logger, in *Infra, o options, fresh bool, runErr error) {
	if o.keep {
		log.Info("infrastructure left running (-keep); reuse it with",
			"flags", fmt.Sprintf("-infra-dir %s -kafka-port %d -pg-port %d -port-base %d -connect-port %d", in.Dir, o.kafkaPort, o.pgPort, o.portBase, o.connectPort))
		return
	}
	log.Info("stopping the infrastructure (-keep leaves it up)")
	if err := in.Down(ctx); err != nil {
		log.Error("infra down", "err", err)
		return // its processes may still run: leave their state dir alone
	}
	if !fresh {
		return
	}
	if runErr != nil {
		dst := filepath.Join(o.dir, "infra")
		if err := copyLogs(in.Dir, dst); err != nil {
			log.Error("copying the infrastructure's logs; leaving its state dir", "dir", in.Dir, "err", err)
			return
		}
		log.Info("the infrastructure's logs", "dir", dst)
	}
	if err := os.RemoveAll(in.Dir); err != nil {
		log.Error("removing the infrastructure's state dir", "dir", in.Dir, "err", err)
	}
}

// copyLogs copies the logs of state dir src (its logs/ and the suite's
// chaos-infra.log) into dst.
func copyLogs(src, dst string) error {
	if err := os.CopyFS(filepath.Join(dst, "logs"), os.DirFS(filepath.Join(src, "logs"))); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(src, "chaos-infra.log"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "chaos-infra.log"), b, 0o644)
}
