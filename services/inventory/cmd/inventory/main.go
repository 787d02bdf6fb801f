// Command inventory runs the inventory service. Configuration comes from the
// environment, over inventory.DefaultConfig: HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/services/inventory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg := inventory.DefaultConfig()
	if err := envconfig.Process("", &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stdout, nil))
	return inventory.Run(ctx, cfg)
}
