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
	"strconv"
	"strings"

	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/pkg/broker"
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

// Endpoints are the addresses of one Kafka and one PostgreSQL server, and
// who to be on Kafka.
type Endpoints struct {
	Mode Mode
	// Kafka is the brokers as the administrator, a super user: test
	// helpers create, read and delete any topic with it.
	Kafka broker.Conn
	// Users are the services' own connections, by service name (the users
	// of kafkaacl.Grants): what a service started on these endpoints runs
	// as, allowed only its own topics and group.
	Users map[string]broker.Conn
	// DatabaseURLs maps each name in Databases to a PostgreSQL URL.
	DatabaseURLs map[string]string
}

// Brokers are the addresses of the Kafka brokers.
func (e Endpoints) Brokers() []string { return e.Kafka.Brokers }

// User returns service's own connection; a service without a user of its
// own (a test's) gets the administrator's.
func (e Endpoints) User(service string) broker.Conn {
	if c, ok := e.Users[service]; ok {
		return c
	}
	return e.Kafka
}

// Env returns the endpoints as environment variables, the way the services'
// configuration reads them: KAFKA_BROKERS with the administrator's
// credentials, each service's as <NAME>_KAFKA_USERNAME and
// <NAME>_KAFKA_PASSWORD (or _PASSWORD_FILE), and <NAME>_DATABASE_URL (the
// test database as TEST_DATABASE_URL).
func (e Endpoints) Env() []string {
	env := append([]string{"KAFKA_BROKERS=" + strings.Join(e.Kafka.Brokers, ",")}, credentials("", e.Kafka)...)
	for _, name := range kafkaacl.Users() {
		if c, ok := e.Users[name]; ok {
			env = append(env, credentials(strings.ToUpper(name)+"_", c)...)
		}
	}
	for _, name := range Databases {
		env = append(env, strings.ToUpper(name)+"_DATABASE_URL="+e.DatabaseURLs[name])
	}
	return env
}

// ServiceEnv returns the variables that make a service's process connect
// to Kafka as service (User): KAFKA_BROKERS and its credentials, to append
// after Env's, which they override.
func (e Endpoints) ServiceEnv(service string) []string {
	c := e.User(service)
	return append([]string{"KAFKA_BROKERS=" + strings.Join(c.Brokers, ",")}, credentials("", c)...)
}

// credentials are c's KAFKA_* variables after prefix, all of them, so that
// they replace inherited ones.
func credentials(prefix string, c broker.Conn) []string {
	p := prefix + "KAFKA_"
	return []string{
		p + "USERNAME=" + c.Username, p + "PASSWORD=" + c.Password, p + "PASSWORD_FILE=" + c.PasswordFile,
		p + "INSECURE=" + strconv.FormatBool(c.Insecure),
	}
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
// KAFKA_BROKERS and every <NAME>_DATABASE_URL are set. The administrator's
// credentials are KAFKA_USERNAME and KAFKA_PASSWORD or KAFKA_PASSWORD_FILE
// (see broker.FromEnv); a service's are <NAME>_KAFKA_USERNAME and
// <NAME>_KAFKA_PASSWORD or <NAME>_KAFKA_PASSWORD_FILE, as scripts/infra.sh
// exports them. The connections are validated when used.
func FromEnv(getenv func(string) string) (Endpoints, bool) {
	e := Endpoints{Mode: ModeEnvironment, DatabaseURLs: map[string]string{}, Users: map[string]broker.Conn{}}
	if getenv("KAFKA_BROKERS") == "" {
		return e, false
	}
	kafka, err := broker.FromEnv(getenv)
	if err != nil {
		return e, false
	}
	e.Kafka = kafka
	for _, name := range kafkaacl.Users() {
		p := strings.ToUpper(name) + "_KAFKA_"
		if user := getenv(p + "USERNAME"); user != "" {
			e.Users[name] = kafka.As(user, getenv(p+"PASSWORD"), getenv(p+"PASSWORD_FILE"))
		}
	}
	for _, name := range Databases {
		u := getenv(strings.ToUpper(name) + "_DATABASE_URL")
		if u == "" {
			return e, false
		}
		e.DatabaseURLs[name] = u
	}
	return e, true
}

// kafkaAdmin is the super user of the brokers Docker and Embedded start.
const kafkaAdmin = "admin"

// grant gives the services' users their ACLs (internal/kafkaacl) through
// the Admin API, as the administrator, as scripts/infra.sh does, and
// creates the users with passwords unless passwords is nil (a broker that
// was started with them).
func grant(admin broker.Conn, passwords map[string]string) error {
	a, err := admin.NewClusterAdmin("infra-acls")
	if err != nil {
		return fmt.Errorf("infra: kafka: connect as %s: %w", admin.Username, err)
	}
	defer a.Close()
	if passwords != nil {
		if err := kafkaacl.SetPasswords(a, passwords); err != nil {
			return fmt.Errorf("infra: kafka: %w", err)
		}
	}
	if err := kafkaacl.Apply(a); err != nil {
		return fmt.Errorf("infra: kafka: %w", err)
	}
	return nil
}

// HowToStart tells a reader how to provide real infrastructure.
const HowToStart = `start Kafka and PostgreSQL first: eval "$(scripts/infra.sh up)"`

// Discover returns the first source that works: the environment
// (KAFKA_BROKERS, the Kafka users' credentials and *_DATABASE_URL, as
// scripts/infra.sh prints them), then
// Docker (testcontainers, docker.go), then embedded (kfake and a throwaway
// PostgreSQL, embedded.go). Under CI=true it accepts only the environment,
// so CI can never quietly fall back to a fake broker. It logs which source
// it used.
func Discover(ctx context.Context, log *slog.Logger) (*Running, error) {
	if e, ok := FromEnv(os.Getenv); ok {
		log.Info("infrastructure from the environment", "mode", e.Mode, "brokers", e.Kafka.Brokers, "kafka_user", e.Kafka.Username)
		r := &Running{Endpoints: e, Stop: func(context.Context) error { return nil }}
		// The broker scripts/infra.sh started can be stopped and started by
		// it — but only if it is the broker in use: infra.sh finds its
		// cluster by CHOREO_INFRA_DIR and KAFKA_PORT, and a shell that kept
		// only the exported addresses of a private cluster would otherwise
		// stop someone else's.
		if script, err := infraScript(); err == nil {
			r.StopKafka = func(ctx context.Context) error {
				if err := sameBroker(ctx, script, e.Kafka.Brokers); err != nil {
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
		log.Info("infrastructure from Docker", "mode", r.Mode, "brokers", r.Kafka.Brokers)
		return r, nil
	case !errors.Is(err, ErrNoDocker):
		return nil, err
	}
	log.Info("no environment endpoints and no Docker engine; starting embedded Kafka and PostgreSQL")
	r, err = Embedded(ctx, EmbeddedOptions{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w; or %s", err, HowToStart)
	}
	log.Info("infrastructure embedded", "mode", r.Mode, "brokers", r.Kafka.Brokers)
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
