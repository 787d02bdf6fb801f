package participant

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kelseyhightower/envconfig"
)

// Main is the whole of a service's command: cmd/<service>/main.go only
// names the service, its defaults and its Run,
//
//	func main() { participant.Main(order.Name, order.DefaultConfig(), order.Run) }
//
// Main reads the environment over the defaults in cfg (the variables the
// envconfig tags of cfg's type name: HTTP_ADDR, DATABASE_URL, KAFKA_BROKERS
// and the service's own), logs JSON to stdout, runs the service until
// SIGINT or SIGTERM, and exits 1 with the error on stderr if it fails.
// Everything else happens in run, so tests and the embedded mode
// (deploy/local) run the same service in-process.
func Main[C any](name string, cfg C, run func(context.Context, C) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := configure(ctx, cfg, run)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// configure is Main without the signals and the exit: the environment over
// cfg, a JSON logger as the default one (which Run uses when
// Config.Logger is nil), then run.
func configure[C any](ctx context.Context, cfg C, run func(context.Context, C) error) error {
	if err := envconfig.Process("", &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stdout, nil)))
	return run(ctx, cfg)
}
