// Package cli holds what every command in tools/ and deploy/local does the
// same way around its run function: the context that ends on a signal, the
// exit status, and the Kafka brokers flag's default.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
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
