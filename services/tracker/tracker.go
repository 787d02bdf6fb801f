// Package tracker is the saga tracker: a passive observer that reads every
// event the four services publish and shows each saga's timeline and where
// it stands, over HTTP and in metrics.
package tracker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/tracker/internal/eventapi"
	"github.com/choreo-saga/choreo/services/tracker/internal/httpapi"
	"github.com/choreo-saga/choreo/services/tracker/internal/store"
)

// Name is the tracker's consumer group and the service label of its
// metrics and logs.
const Name = "tracker"

// Topics are the saga's topics, every one of which the tracker reads.
var Topics = []string{events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping}

// Config is the tracker's configuration: the variables every service reads
// (HTTP_ADDR, DATABASE_URL, KAFKA_BROKERS, AUTH_*, …; the outbox and fail-point
// ones have nothing to act on here), its SLA and its retention.
// cmd/tracker reads it from the environment over DefaultConfig.
type Config struct {
	participant.Config
	// SagaSLA is how long a saga may run, from its first event's
	// occurred_at, before the tracker calls it stuck.
	SagaSLA time.Duration `envconfig:"TRACKER_SAGA_SLA"`
	// Retention is how long an ended saga is kept, once the tracker last
	// saw an event of it, beyond the longest Kafka may keep one (the
	// topics' retention.ms plus segment.ms): then no replay can bring any
	// of it back. It must outlast the tracker's worst lag behind the
	// topics.
	Retention time.Duration `envconfig:"TRACKER_RETENTION"`
	// StuckEvery is how often the stuck-saga gauge is recomputed from the
	// database.
	StuckEvery time.Duration `ignored:"true"`
	// ForgetEvery is how often ended sagas are forgotten; a minute unless
	// a test needs it sooner.
	ForgetEvery time.Duration `ignored:"true"`
	// GroupID is the consumer group; Name unless a test needs its own.
	GroupID string `ignored:"true"`
	// Now is the clock that tells stuck from running; nil means time.Now.
	Now func() time.Time `ignored:"true"`

	// topics replaces Topics in a test that sets how long Kafka keeps the
	// records of the topics it reads, which it may do only to its own.
	topics []string
}

// DefaultConfig returns the defaults: HTTP on :8084, a 30-second SLA,
// ended sagas kept a day longer than Kafka keeps their events.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8084"), SagaSLA: 30 * time.Second, Retention: 24 * time.Hour}
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.SagaSLA <= 0 {
		return fmt.Errorf("TRACKER_SAGA_SLA: %s is not a positive duration", c.SagaSLA)
	}
	if c.Retention <= 0 {
		return fmt.Errorf("TRACKER_RETENTION: %s is not a positive duration", c.Retention)
	}
	return nil
}

// Schema is the tracker's tables. It needs neither processed_events nor
// an outbox: its own table's unique event id de-duplicates, and it emits
// nothing.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}

// Run runs the tracker until ctx ends: its consumer group, its HTTP API,
// the stuck-saga gauge and the forgetting of ended sagas Kafka no longer
// holds. It returns after all four stopped, the message in hand recorded
// and its offset committed. It is no participant: its group and database
// are its own, it emits nothing, no service depends on it, and it must
// never drive the saga (docs/tracker.md).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StuckEvery <= 0 {
		cfg.StuckEvery = 5 * time.Second
	}
	if cfg.ForgetEvery <= 0 {
		cfg.ForgetEvery = time.Minute
	}
	if cfg.GroupID == "" {
		cfg.GroupID = Name
	}
	topics := cfg.topics
	if len(topics) == 0 {
		topics = Topics
	}
	log := cfg.Logger.With("service", Name)
	cfg.Kafka.Warn(log)

	verifier, err := bearer.New(ctx, cfg.Auth, log)
	if err != nil {
		return err
	}
	db, err := pg.Open(ctx, cfg.DatabaseURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := pg.Migrate(ctx, db, log, Schema); err != nil {
		return err
	}
	// The tracker may start before the services that create the topics.
	ensure := func(ctx context.Context, topics []string) error {
		return broker.EnsureTopicsWith(ctx, cfg.Kafka, Name, cfg.TopicSettings, topics...)
	}
	if err := ensure(ctx, topics); err != nil {
		return err
	}
	st := store.New(db, cfg.SagaSLA, cfg.Now)
	group, err := consumer.New(consumer.Config{
		Kafka:      cfg.Kafka,
		GroupID:    cfg.GroupID,
		Topics:     topics,
		Handler:    eventapi.Handler(Name, st, log, observeEnd),
		DeadLetter: eventapi.SkipDeadLetter(log),
		InstanceID: cfg.InstanceID(cfg.GroupID),
		Ensure:     ensure,
		Logger:     log,
	})
	if err != nil {
		return err
	}
	routes := httpapi.Routes(cfg.SagaSLA, cfg.Now)(log, db, map[string]web.Check{
		"database": db.PingContext,
		"kafka":    broker.NewProbe(cfg.Kafka, time.Second).Check,
		"consumer": group.Ready,
	})
	api := verifier.Authenticate(log, append(slices.Clone(bearer.OpenPaths), httpapi.PageAssets...)...)(routes)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return group.Run(ctx) })
	g.Go(func() error { return web.Serve(ctx, cfg.HTTPAddr, api, log) })
	g.Go(func() error { return watchStuck(ctx, st, cfg.StuckEvery, log) })
	forgottenSagas.WithLabelValues(Name) // shown from the start, at 0
	g.Go(func() error {
		f := forgetter{st: st, kafka: cfg.Kafka, topics: topics, margin: cfg.Retention,
			log: log.With("component", "retention")}
		return f.run(ctx, cfg.ForgetEvery)
	})
	log.Info("tracker started", "http", cfg.HTTPAddr, "consumes", topics, "sla", cfg.SagaSLA, "retention", cfg.Retention)
	err = g.Wait()
	log.Info("tracker stopped", "err", err)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
