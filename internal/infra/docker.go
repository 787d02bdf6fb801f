package infra

import (
	"context"
	"log/slog"
)

// Docker starts Kafka and PostgreSQL with testcontainers. (Placeholder: being written.)
func Docker(ctx context.Context, log *slog.Logger) (*Running, error) {
	return nil, ErrNoDocker
}
