// Command payment runs the payment service. Configuration comes from the
// environment, over payment.DefaultConfig: HTTP_ADDR, DATABASE_URL,
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

	"github.com/choreo-saga/choreo/services/payment"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "payment:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg := payment.DefaultConfig()
	if err := envconfig.Process("", &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stdout, nil))
	return payment.Run(ctx, cfg)
}
