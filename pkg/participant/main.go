package participant

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/pkg/tracing"
)

// Main is the whole of a service's command: it reads the environment over
// the defaults in cfg (the envconfig tags of cfg's type), logs JSON to
// stdout at LOG_LEVEL, exports traces when OTEL_EXPORTER_OTLP_ENDPOINT is
// set, runs run until SIGINT or SIGTERM, and exits 1 with the error on
// stderr if it fails. Tests and deploy/local call run in-process instead:
//
//	func main() { participant.Main(order.Name, order.DefaultConfig(), order.Run) }
func Main[C any](name string, cfg C, run func(context.Context, C) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := configure(ctx, name, cfg, run)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// configure is Main without the signals and the exit: the environment over
// cfg, a JSON logger at LOG_LEVEL as the default one (which Run uses when
// Config.Logger is nil), the global tracer provider, then run. The spans
// still buffered are flushed after run returns.
func configure[C any](ctx context.Context, name string, cfg C, run func(context.Context, C) error) error {
	if err := envconfig.Process("", &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var logs logConfig
	if err := envconfig.Process("", &logs); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var traces tracing.Config
	if err := envconfig.Process("", &traces); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	slog.SetDefault(NewLogger(os.Stdout, logs.Level))
	shutdown, err := tracing.Setup(ctx, traces, name)
	if err != nil {
		return err
	}
	defer func() {
		// ctx has ended by now: the flush gets a deadline of its own.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if serr := shutdown(flushCtx); serr != nil {
			slog.Warn("traces not flushed", "err", serr)
		}
	}()
	return run(ctx, cfg)
}

// NewLogger is how every Choreo process logs: JSON lines to w, from level
// up. Main builds the services' logger with it and deploy/local its own, so
// a line reads the same however a service was started.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// logConfig is how a command logs. It is read apart from the service's
// Config because the logger is made here, before Run, and tests and the
// embedded mode hand Run a logger of their own.
type logConfig struct {
	// Level is the least severe level written: DEBUG, INFO (the
	// default), WARN or ERROR, as slog.Level parses it (so "INFO+2"
	// works too). DEBUG adds the access log (a line per HTTP request)
	// and a line per event applied.
	Level slog.Level `envconfig:"LOG_LEVEL" default:"INFO"`
}
