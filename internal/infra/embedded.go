package infra

import (
	"context"
	"errors"
	"log/slog"
)

// EmbeddedOptions configures Embedded.
type EmbeddedOptions struct {
	// DataDir keeps PostgreSQL's data between runs when set; when empty a
	// temporary directory is used and removed by Stop.
	DataDir string
	// KafkaAddr is where the in-process broker listens, e.g.
	// "127.0.0.1:9092"; empty picks a free port.
	KafkaAddr string
	// PGPort is PostgreSQL's port; 0 picks a free one.
	PGPort int
	Logger *slog.Logger
}

// Embedded starts kfake and a throwaway PostgreSQL. (Placeholder: being written.)
func Embedded(ctx context.Context, opts EmbeddedOptions) (*Running, error) {
	return nil, errors.New("infra: embedded mode not implemented yet")
}
