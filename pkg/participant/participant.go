// Package participant is the runtime every service of the saga runs on: its
// configuration, its wiring and the consumer's one transaction path.
package participant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-chi/chi/v5"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/failpoint"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/pkg/web"
)

// Config is the configuration every service shares. A service's own Config
// embeds it, so the variables below are read by the same names everywhere.
type Config struct {
	HTTPAddr    string `envconfig:"HTTP_ADDR"`
	DatabaseURL string `envconfig:"DATABASE_URL" required:"true"`
	// Kafka is the brokers and the service's own credentials there
	// (KAFKA_BROKERS, KAFKA_USERNAME, KAFKA_PASSWORD or KAFKA_PASSWORD_FILE,
	// KAFKA_TLS_CA_FILE, …; see broker.Conn).
	Kafka broker.Conn `envconfig:"KAFKA"`
	// GroupInstanceID is this instance's static member id in its consumer
	// group (see consumer.Config.InstanceID), e.g. "payment-1". Empty: one
	// derived from the host name and HTTP port (see InstanceID), so a
	// restarted instance takes its partitions back at once by default.
	GroupInstanceID string `envconfig:"KAFKA_GROUP_INSTANCE_ID"`
	// ConsumerBatch is how many ready events of one partition are applied
	// in one transaction (see Spec.BatchHandler), 1 to MaxBatch. Default 32.
	ConsumerBatch int `envconfig:"CONSUMER_BATCH"`
	// FailPoints arms crash points for the chaos suite (see package
	// failpoint), e.g. "after-commit=0.01". Never set in production.
	FailPoints string `envconfig:"CHOREO_FAILPOINTS"`
	// ProcessedRetention is the least time a processed_events mark is
	// kept, even once Kafka can no longer deliver its event (see
	// Pruner); the topic's retention.ms applies if longer. Default 168h.
	ProcessedRetention time.Duration `envconfig:"PROCESSED_EVENTS_RETENTION"`
	// PprofAddr, when set (e.g. "127.0.0.1:6060"), serves the Go runtime's
	// profiles (net/http/pprof) there, apart from the API so they are
	// never exposed with it. Empty: off.
	PprofAddr string `envconfig:"PPROF_ADDR"`
	// OutboxRelay is who publishes the outbox (OUTBOX_RELAY): "builtin"
	// (the default, also when empty), the service's own outbox.Relay; or
	// "debezium", a Kafka Connect worker's Debezium connector
	// (internal/connect), which must be registered first: the service waits
	// for its replication slot, runs no relay and sweeps the rows Debezium
	// has read (outbox.Sweep).
	OutboxRelay string `envconfig:"OUTBOX_RELAY"`
	// ConnectURL is the Kafka Connect worker's REST API, e.g.
	// "http://127.0.0.1:8183" (KAFKA_CONNECT_URL). With OUTBOX_RELAY=debezium
	// the service exports its connector's state read there
	// (choreo_outbox_connector_*); empty: only its slot's gauges.
	ConnectURL string `envconfig:"KAFKA_CONNECT_URL"`
	// ConnectUsername and ConnectPasswordFile are the worker's REST
	// credential (KAFKA_CONNECT_USERNAME, KAFKA_CONNECT_PASSWORD_FILE; see
	// scripts/infra.sh): without it the worker answers 401.
	ConnectUsername     string `envconfig:"KAFKA_CONNECT_USERNAME"`
	ConnectPasswordFile string `envconfig:"KAFKA_CONNECT_PASSWORD_FILE"`
	// Auth is where the API finds the keys of its callers' tokens
	// (AUTH_JWKS_URL or AUTH_PUBLIC_KEY_FILE, AUTH_ISSUER, AUTH_AUDIENCE;
	// see package bearer). Without a key the service refuses to start,
	// unless AUTH_DISABLED=true.
	Auth bearer.Config `envconfig:"AUTH"`
	// TopicSettings are the partitions, replication factor and
	// min.insync.replicas of the topics the service creates
	// (KAFKA_PARTITIONS, KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS).
	broker.TopicSettings
	Logger *slog.Logger `ignored:"true"`
}

// DefaultConfig returns the defaults, serving HTTP on httpAddr, with the
// topic settings of a single local broker; there are none for the database
// and the brokers.
func DefaultConfig(httpAddr string) Config {
	return Config{HTTPAddr: httpAddr, ConsumerBatch: 32, ProcessedRetention: 168 * time.Hour, OutboxRelay: outbox.RelayBuiltin, TopicSettings: broker.DefaultTopicSettings()}
}

// InstanceID is the static member id of this instance in group:
// GroupInstanceID if set, else consumer.InstanceID of the host name and
// HTTP port ("" with an ephemeral port: dynamic membership).
func (c Config) InstanceID(group string) string {
	if c.GroupInstanceID != "" {
		return c.GroupInstanceID
	}
	host, _ := os.Hostname()
	return consumer.InstanceID(group, host, c.HTTPAddr)
}

// Validate reports the first bad setting, naming its environment variable.
func (c Config) Validate() error {
	if err := pg.ValidateURL(c.DatabaseURL); err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	if c.HTTPAddr == "" {
		return errors.New("HTTP_ADDR: empty")
	}
	if c.ProcessedRetention <= 0 {
		return fmt.Errorf("PROCESSED_EVENTS_RETENTION: %s is not positive", c.ProcessedRetention)
	}
	if c.ConsumerBatch < 1 || c.ConsumerBatch > MaxBatch {
		return fmt.Errorf("CONSUMER_BATCH: %d is not 1 to %d", c.ConsumerBatch, MaxBatch)
	}
	if c.OutboxRelay != "" && c.OutboxRelay != outbox.RelayBuiltin && c.OutboxRelay != outbox.RelayDebezium {
		return fmt.Errorf("OUTBOX_RELAY: %q is not %q or %q", c.OutboxRelay, outbox.RelayBuiltin, outbox.RelayDebezium)
	}
	if u, err := url.Parse(c.ConnectURL); c.ConnectURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return fmt.Errorf("KAFKA_CONNECT_URL: %q is not an http or https URL", redacted(c.ConnectURL))
	}
	if err := c.Auth.Validate(); err != nil {
		return err
	}

	return c.TopicSettings.Validate()
}

// Spec is what distinguishes one service from another.
type Spec struct {
	// Name is the consumer group, the de-duplication scope, the source of
	// the events it emits, and the prefix of its dead-letter topic.
	Name string
	// Produces is the topic its reactions and API emit to.
	Produces string
	// Schema holds its own tables.
	Schema pg.Schema
	// Reactions are what it does with the events it consumes; the topics
	// it consumes follow from their types.
	Reactions []Reaction
	// API builds its HTTP handler, the router of web.NewRouter with the
	// service's routes; checks are the readiness probes to serve on
	// /readyz. Run mounts the operator's API (Admin) on it at /admin.
	API func(log *slog.Logger, db *sqlx.DB, checks map[string]web.Check) http.Handler
	// Now is the clock reactions read through Tx.Now; nil means time.Now.
	Now func() time.Time
	// Jobs are the service's own background work, e.g. the order service's
	// deadline sweep. Run runs each on the service's database, after its
	// migrations, beside the relay, the consumer and the API, until ctx
	// ends; a job's error stops the service like theirs.
	Jobs []Job
}

// Job is background work of a service: it runs until ctx ends, then
// returns nil.
type Job func(ctx context.Context, db *sqlx.DB, log *slog.Logger) error

// Validate reports a Spec the runtime cannot run: no name, no topic to
// produce to, or two reactions to one event type.
func (s Spec) Validate() error {
	if s.Name == "" || s.Produces == "" {
		return errors.New("participant: a Spec needs a Name and the topic it Produces")
	}
	seen := map[string]bool{}
	for _, r := range s.Reactions {
		if seen[r.eventType] {
			return fmt.Errorf("participant: %s has two reactions to %s", s.Name, r.eventType)
		}
		seen[r.eventType] = true
	}
	return nil
}

// Consumes returns the topics the service's reactions listen to.
func (s Spec) Consumes() []string {
	var topics []string
	for _, r := range s.Reactions {
		if t, ok := events.TopicOf(r.eventType); ok && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	return topics
}

// Handler returns the service's handler for one message at a time: a
// batch of one through BatchHandler, the path Run consumes with. Tests
// call it directly, e.g. from many goroutines with the same message.
func (s Spec) Handler(db *sqlx.DB, log *slog.Logger) consumer.Handler {
	b := s.BatchHandler(db, log)
	return consumer.HandlerFunc(func(ctx context.Context, m *sarama.ConsumerMessage) error {
		failed, err := b.HandleBatch(ctx, []*sarama.ConsumerMessage{m})
		if err != nil {
			return err
		}
		if failed != nil {
			return failed.Err
		}
		return nil
	})
}

// DeadLetterTo returns the function that parks the service's poison
// messages on its dead-letter topic (see DeadLetter).
func (s Spec) DeadLetterTo(db *sqlx.DB) consumer.DeadLetterFunc {
	return park.DeadLetter(db, events.DeadLetterTopic(s.Name), s.Name)
}

// ServiceConfig is a service's own configuration: a struct that embeds
// Config, with settings of its own or none.
type ServiceConfig interface{ participant() Config }

func (c Config) participant() Config { return c }

// Run runs the service whose Spec follows from its configuration until ctx
// ends: it applies the shared schemas and the service's own, creates its
// topics, and runs the outbox relay (which alone publishes), the consumer
// group and the HTTP API, with the operator's under /admin (package park).
// Each message goes through the chain Decode → Guard → Route →
// DecodePayload, then into one transaction (transact: parkBehind → mark →
// react → outbox → commit) that runs the service's Reaction. It returns the
// first component's error, or nil after a clean shutdown. Every service's
// Run is one line, and Main is the command around it:
//
//	func Run(ctx context.Context, cfg Config) error { return participant.Run(ctx, cfg, Spec) }
func Run[C ServiceConfig](ctx context.Context, cfg C, spec func(C) (Spec, error)) error {
	s, err := spec(cfg)
	if err != nil {
		return err
	}
	return run(ctx, cfg.participant(), s)
}

// run is Run once the Spec is known.
func run(ctx context.Context, cfg Config, spec Spec) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := failpoint.Enable(cfg.FailPoints); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("service", spec.Name)

	verifier, err := bearer.New(ctx, cfg.Auth, log)
	if err != nil {
		return err
	}
	db, err := pg.Open(ctx, cfg.DatabaseURL, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := pg.Migrate(ctx, db, log, idem.Schema, outbox.Schema, park.Schema, spec.Schema); err != nil {
		return err
	}

	dlq := events.DeadLetterTopic(spec.Name)
	topics := append([]string{spec.Produces, dlq}, spec.Consumes()...)
	cfg.Kafka.Warn(log)
	connectURL, err := cfg.connectURL()
	if err != nil {
		return err
	}
	publish, closePublisher, err := outbox.Start(ctx, outbox.StartConfig{
		Relay: cfg.OutboxRelay, Name: spec.Name, DB: db, DatabaseURL: cfg.DatabaseURL, ConnectURL: connectURL,
		Topics:      []string{spec.Produces, dlq}, // what its Kafka user may write (kafkaacl)
		NewProducer: func() (sarama.SyncProducer, error) { return cfg.Kafka.NewSyncProducer(spec.Name) },
		Logger:      log,
	})
	if err != nil {
		return err
	}
	defer closePublisher()
	ensure := func(ctx context.Context, topics []string) error {
		return broker.EnsureTopicsWith(ctx, cfg.Kafka, spec.Name, cfg.TopicSettings, topics...)
	}
	if err := ensure(ctx, topics); err != nil {
		return err
	}
	group, err := consumer.New(consumer.Config{
		Kafka:      cfg.Kafka,
		GroupID:    spec.Name,
		Topics:     spec.Consumes(),
		Batch:      spec.BatchHandler(db, log),
		MaxBatch:   cfg.ConsumerBatch,
		DeadLetter: spec.DeadLetterTo(db),
		InstanceID: cfg.InstanceID(spec.Name),
		Ensure:     ensure,
		Logger:     log,
	})
	if err != nil {
		return err
	}
	routes := spec.API(log, db, map[string]web.Check{
		"database": db.PingContext,
		"kafka":    broker.NewProbe(cfg.Kafka, time.Second).Check,
		"consumer": group.Ready,
	})
	router, ok := routes.(chi.Router)
	if !ok {
		return fmt.Errorf("participant: %s's API is a %T, not the chi router of web.NewRouter that /admin mounts on", spec.Name, routes)
	}
	router.Mount("/admin", spec.Admin(db, log, verifier))
	api := web.Instrument(spec.Name, router, verifier.Authenticate(log, bearer.OpenPaths...))
	setBuildInfo(spec.Name)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return publish(ctx) })
	g.Go(func() error { return group.Run(ctx) })
	g.Go(func() error {
		return idem.Pruner{Group: spec.Name, Kafka: cfg.Kafka, DB: db, Window: cfg.ProcessedRetention, Log: log.With("component", "retention")}.Run(ctx)
	})
	g.Go(func() error { return web.Serve(ctx, cfg.HTTPAddr, api, log) })
	if cfg.PprofAddr != "" {
		g.Go(func() error { return web.Serve(ctx, cfg.PprofAddr, web.Pprof(), log.With("component", "pprof")) })
	}
	g.Go(func() error { return park.WatchGauges(ctx, db, spec.Name, log) })
	for _, job := range spec.Jobs {
		g.Go(func() error { return job(ctx, db, log) })
	}
	log.Info("service started", "http", cfg.HTTPAddr, "produces", spec.Produces, "consumes", spec.Consumes(), "instance", cfg.InstanceID(spec.Name))
	err = g.Wait()
	log.Info("service stopped", "err", err)
	return err
}
