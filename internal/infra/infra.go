// Package infra finds or starts the Kafka and PostgreSQL that the services,
// the embedded mode and the tests run against.
package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Databases are the logical databases every source provides: one per
// service (the tracker included), and one for package tests.
var Databases = []string{"order", "payment", "inventory", "shipping", "tracker", "test"}

// DatabaseName is the PostgreSQL database behind a name in Databases —
// "test" is choreo_test, the others <name>_db — the same databases
// scripts/infra.sh creates.
func DatabaseName(name string) string {
	if name == "test" {
		return "choreo_test"
	}
	return name + "_db"
}

// Mode names where the endpoints came from.
type Mode string

// Modes, in Discover's order of preference.
const (
	ModeEnvironment Mode = "environment"
	ModeDocker      Mode = "testcontainers"
	ModeEmbedded    Mode = "embedded"
)

// Endpoints are the addresses of one Kafka and one PostgreSQL server.
type Endpoints struct {
	Mode    Mode
	Brokers []string
	// DatabaseURLs maps each name in Databases to a PostgreSQL URL.
	DatabaseURLs map[string]string
}

// Env returns the endpoints as environment variables, the way the services'
// configuration reads them: KAFKA_BROKERS and <NAME>_DATABASE_URL (the test
// database as TEST_DATABASE_URL).
func (e Endpoints) Env() []string {
	env := []string{"KAFKA_BROKERS=" + strings.Join(e.Brokers, ",")}
	for _, name := range Databases {
		env = append(env, strings.ToUpper(name)+"_DATABASE_URL="+e.DatabaseURLs[name])
	}
	return env
}

// Running is a source of endpoints that may own processes or containers.
type Running struct {
	Endpoints
	// Stop releases what the source started; a no-op for the environment.
	Stop func(ctx context.Context) error
	// StopKafka makes the broker unavailable and StartKafka brings it back
	// with its data, for fault-injection tests. Nil if the source cannot.
	StopKafka, StartKafka func(ctx context.Context) error
}

// ErrNoDocker is returned by Docker when no Docker engine answers.
var ErrNoDocker = errors.New("infra: no Docker engine")

// FromEnv reads the endpoints from the environment. It reports false unless
// KAFKA_BROKERS and every <NAME>_DATABASE_URL are set.
func FromEnv(getenv func(string) string) (Endpoints, bool) {
	e := Endpoints{Mode: ModeEnvironment, DatabaseURLs: map[string]string{}}
	b := getenv("KAFKA_BROKERS")
	if b == "" {
		return e, false
	}
	e.Brokers = strings.Split(b, ",")
	for _, name := range Databases {
		u := getenv(strings.ToUpper(name) + "_DATABASE_URL")
		if u == "" {
			return e, false
		}
		e.DatabaseURLs[name] = u
	}
	return e, true
}

// HowToStart tells a reader how to provide real infrastructure.
const HowToStart = `start Kafka and PostgreSQL first: eval "$(scripts/infra.sh up)"`

// Discover returns the first source that works: the environment
// (KAFKA_BROKERS and *_DATABASE_URL, as scripts/infra.sh prints them), then
// Docker (testcontainers, docker.go), then embedded (kfake and a throwaway
// PostgreSQL, embedded.go). Under CI=true it accepts only the environment,
// so CI can never quietly fall back to a fake broker. It logs which source
// it used.
func Discover(ctx context.Context, log *slog.Logger) (*Running, error) {
	if e, ok := FromEnv(os.Getenv); ok {
		log.Info("infrastructure from the environment", "mode", e.Mode, "brokers", e.Brokers)
		r := &Running{Endpoints: e, Stop: func(context.Context) error { return nil }}
		// The broker scripts/infra.sh started can be stopped and started by
		// it — but only if it is the broker in use: infra.sh finds its
		// cluster by CHOREO_INFRA_DIR and KAFKA_PORT, and a shell that kept
		// only the exported addresses of a private cluster would otherwise
		// stop someone else's.
		if script, err := infraScript(); err == nil {
			r.StopKafka = func(ctx context.Context) error {
				if err := sameBroker(ctx, script, e.Brokers); err != nil {
					return err
				}
				return runScript(ctx, script, "kafka-stop")
			}
			r.StartKafka = func(ctx context.Context) error { return runScript(ctx, script, "kafka-start") }
		}
		return r, nil
	}
	if os.Getenv("CI") == "true" {
		return nil, fmt.Errorf("infra: CI=true requires KAFKA_BROKERS and every *_DATABASE_URL in the environment (real Kafka and PostgreSQL); %s", HowToStart)
	}
	r, err := Docker(ctx, log)
	switch {
	case err == nil:
		log.Info("infrastructure from Docker", "mode", r.Mode, "brokers", r.Brokers)
		return r, nil
	case !errors.Is(err, ErrNoDocker):
		return nil, err
	}
	log.Info("no environment endpoints and no Docker engine; starting embedded Kafka and PostgreSQL")
	r, err = Embedded(ctx, EmbeddedOptions{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w; or %s", err, HowToStart)
	}
	log.Info("infrastructure embedded", "mode", r.Mode, "brokers", r.Brokers)
	return r, nil
}

// infraScript finds scripts/infra.sh by walking up from the working
// directory to the module root.
func infraScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			script := filepath.Join(dir, "scripts", "infra.sh")
			if _, err := os.Stat(script); err != nil {
				return "", err
			}
			return script, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("infra: no go.mod above the working directory")
		}
		dir = parent
	}
}

// sameBroker reports an error unless scripts/infra.sh, in this
// environment, manages the brokers in use.
func sameBroker(ctx context.Context, script string, inUse []string) error {
	out, err := exec.CommandContext(ctx, "bash", script, "env").Output()
	if err != nil {
		return fmt.Errorf("infra: %s env: %w", script, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "export KAFKA_BROKERS="); ok {
			if v == strings.Join(inUse, ",") {
				return nil
			}
			return fmt.Errorf("infra: refusing to stop Kafka: KAFKA_BROKERS is %s but scripts/infra.sh in this environment manages %s; export the CHOREO_INFRA_DIR and KAFKA_PORT the cluster was started with", strings.Join(inUse, ","), v)
		}
	}
	return fmt.Errorf("infra: %s env printed no KAFKA_BROKERS", script)
}

func runScript(ctx context.Context, script, cmd string) error {
	out, err := exec.CommandContext(ctx, "bash", script, cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("infra: %s %s: %w\n%s", script, cmd, err, out)
	}
	return nil
}
