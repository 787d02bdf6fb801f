// This file holds the relay's configuration and its clock.

package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Name labels the relay's metrics and logs, e.g. the service name.
	Name string
	// DB is the service's database, holding the outbox table. The active
	// relay keeps one of its connections for as long as it leads.
	DB *sqlx.DB
	// DatabaseURL is used to LISTEN for new rows on a dedicated connection.
	DatabaseURL string
	// Publisher sends batches to Kafka.
	Publisher Publisher
	// Logger receives one line per published batch and every failure.
	Logger *slog.Logger
	// BatchSize caps the rows published per round trip. Default 1024: a
	// round costs a few statements and one produce request whatever its
	// size; sarama splits a batch that would exceed its request limits.
	BatchSize int
	// PollInterval is the safety net for missed notifications, and how
	// soon a standby notices that the leader is gone. Run waits at most
	// min(PollInterval, Lease/3) between rounds. Default 2s.
	PollInterval time.Duration
	// Lease bounds how long a frozen or cut-off leader keeps the
	// leadership: its session runs with idle_session_timeout = Lease, and a
	// live leader touches it at least every Lease/3. Default 8s; at least
	// 1s. A caller of PublishOnce must call it at least every Lease to
	// keep leading.
	Lease time.Duration
	// Retention is how long sent rows are kept for inspection. Default 1h.
	Retention time.Duration
	// Clock is the time the relay reads and waits on; tests pass a fake
	// one. Default: the system clock. (Statement timeouts, and ages the
	// database computes with now(), stay on real time.)
	Clock Clock
}

// Publisher is the part of sarama.SyncProducer the relay needs. The producer
// must be configured with RequiredAcks = sarama.WaitForAll, so a message
// counts as published only once every in-sync replica has it.
type Publisher interface {
	SendMessages(msgs []*sarama.ProducerMessage) error
}

// Clock is the source of time of a Relay.
type Clock interface {
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d
	// has passed, as time.NewTimer does.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Relay uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing, as (*time.Timer).Stop does.
	Stop() bool
}

// systemClock is the default Clock: package time.
type systemClock struct{}

func (systemClock) Now() time.Time                 { return time.Now() }
func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.Timer.C }

const (
	// DefaultLease is RelayConfig.Lease's default.
	DefaultLease = 8 * time.Second

	// statementTimeout bounds the relay's own short statements.
	statementTimeout = 10 * time.Second
)

func (c *RelayConfig) setDefaults() {
	if c.BatchSize <= 0 {
		c.BatchSize = 1024
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
}

// Validate reports a missing dependency.
func (c RelayConfig) Validate() error {
	switch {
	case c.DB == nil:
		return errors.New("outbox: RelayConfig.DB is nil")
	case c.DatabaseURL == "":
		return errors.New("outbox: RelayConfig.DatabaseURL is empty")
	case c.Publisher == nil:
		return errors.New("outbox: RelayConfig.Publisher is nil")
	case c.Lease > 0 && c.Lease < time.Second:
		return fmt.Errorf("outbox: RelayConfig.Lease %v is below 1s", c.Lease)
	}
	return nil
}
