// Package cli holds what every command in tools/ and deploy/local does the
// same way around its run function: the context that ends on a signal, the
// exit status, and the Kafka connection (the brokers flag's default and the
// credentials from the environment).
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// Main calls run with a context that ends on SIGINT or SIGTERM and exits
// with status 1, printing "name: err" to stderr, if run returns an error.
// After the first signal the default handling is restored, so a second
// one exits at once instead of waiting for run to finish shutting down.
// Only main calls it: it is where the process exits.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// DefaultBrokers is where the local Kafka listens (scripts/infra.sh,
// deploy/local).
const DefaultBrokers = "127.0.0.1:9092"

// Brokers splits a comma-separated -brokers flag into addresses; an empty
// one means DefaultBrokers.
func Brokers(flag string) []string {
	if flag == "" {
		flag = DefaultBrokers
	}
	return strings.Split(flag, ",")
}

// Kafka is the connection a command uses: the brokers of brokersFlag (see
// Brokers) as the user the environment names (KAFKA_USERNAME and
// KAFKA_PASSWORD or KAFKA_PASSWORD_FILE, as `scripts/infra.sh env`
// exports them for the administrator; see broker.Conn). When it names
// none, the administrator of the local run modes, whose password they keep
// in LocalAdminFile. Without credentials it fails, unless
// KAFKA_INSECURE=true.
func Kafka(brokersFlag string, getenv func(string) string) (broker.Conn, error) {
	c, err := broker.FromEnv(getenv)
	if err != nil {
		return c, err
	}
	c.Brokers = Brokers(brokersFlag)
	if c.Username == "" && !c.Insecure {
		if path, err := LocalAdminFile(getenv); err == nil {
			if _, err := os.Stat(path); err == nil {
				c.Username, c.PasswordFile = LocalAdmin, path
			}
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	c.Warn(slog.Default())
	return c, nil
}

// LocalAdmin is the Kafka administrator of the local run modes
// (scripts/infra.sh, deploy/local).
const LocalAdmin = "admin"

// LocalAdminFileEnv names the variable that overrides LocalAdminFile's path.
const LocalAdminFileEnv = "CHOREO_KAFKA_ADMIN_FILE"

// LocalAdminFile is where make run and deploy/local keep LocalAdmin's
// password, readable by its owner only, so that the tools reach their
// broker without being told: $CHOREO_KAFKA_ADMIN_FILE, else
// $XDG_CACHE_HOME/choreo/kafka-admin-password, else
// $HOME/.cache/choreo/kafka-admin-password (scripts/run.sh computes the
// same path).
func LocalAdminFile(getenv func(string) string) (string, error) {
	if p := getenv(LocalAdminFileEnv); p != "" {
		return p, nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "choreo", "kafka-admin-password"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "choreo", "kafka-admin-password"), nil
	}
	return "", fmt.Errorf("local Kafka admin file: set %s, XDG_CACHE_HOME or HOME", LocalAdminFileEnv)
}

// WriteLocalAdmin stores password at path, readable by its owner only.
func WriteLocalAdmin(path, password string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("local Kafka admin file: %w", err)
	}
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("local Kafka admin file: %w", err)
	}
	return os.Chmod(path, 0o600) // WriteFile keeps the mode of a file that exists
}
