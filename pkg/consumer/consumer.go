// Package consumer runs a Kafka consumer group that marks a message's
// offset only once its handler has committed the message's effects.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// Metrics, labelled by service (the consumer group, one per service):
// retries show a dependency in trouble (the partition is waiting, not
// skipping); dead letters need a human. The lag and membership gauges are
// in health.go.
var (
	retries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_consumer_retries_total",
		Help: "Failed attempts at handling a message that will be retried, by service and topic.",
	}, []string{"service", "topic"})
	deadLetters = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "choreo_consumer_dead_letters_total",
		Help: "Messages that could never be processed and were dead-lettered, by service and topic.",
	}, []string{"service", "topic"})
)

// Handler processes one message. It returns nil once the message's effects
// are durable, a Permanent error if the message can never be processed, and
// any other error to have it retried.
type Handler interface {
	Handle(ctx context.Context, m *sarama.ConsumerMessage) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m *sarama.ConsumerMessage) error

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, m *sarama.ConsumerMessage) error { return f(ctx, m) }

// BatchHandler processes several messages of one partition together, in
// offset order. It returns (nil, nil) once every message's effects are
// durable, and any error to have the whole batch retried. A message that
// can never be processed ends the batch: HandleBatch returns it as a
// Failure once the effects of the messages before it are durable, leaves
// it and every message after it unapplied, and the consumer dead-letters
// it and hands the rest over again.
type BatchHandler interface {
	HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (*Failure, error)
}

// Failure is the message of a batch that can never be processed, and why.
type Failure struct {
	Msg *sarama.ConsumerMessage
	Err error
}

// one adapts a Handler to a batch of one message.
type one struct{ h Handler }

func (o one) HandleBatch(ctx context.Context, msgs []*sarama.ConsumerMessage) (*Failure, error) {
	if len(msgs) != 1 {
		return nil, fmt.Errorf("consumer: a Handler takes one message at a time, got %d", len(msgs))
	}
	err := o.h.Handle(ctx, msgs[0])
	if IsPermanent(err) {
		return &Failure{Msg: msgs[0], Err: err}, nil
	}
	return nil, err
}

// DeadLetterFunc durably records a message that can never be processed,
// with the reason. It is retried like a handler until it succeeds.
type DeadLetterFunc func(ctx context.Context, m *sarama.ConsumerMessage, reason error) error

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Config configures a Group.
type Config struct {
	// Kafka is where the group consumes, as whom.
	Kafka broker.Conn
	// GroupID is the consumer group, one per service.
	GroupID string
	Topics  []string
	// Handler handles one message at a time; Batch, several. Set one.
	Handler Handler
	Batch   BatchHandler
	// MaxBatch caps the messages handed to Batch at once: those the
	// partition has ready when the first arrives (waiting for none, so a
	// quiet system gets no added latency and a busy one fills batches).
	// Default 32.
	MaxBatch int
	// DeadLetter receives messages whose handling failed permanently.
	DeadLetter DeadLetterFunc
	Logger     *slog.Logger
	// MaxBackoff caps the wait between retries of one message. Default 5s.
	MaxBackoff time.Duration
	// HandleTimeout bounds one attempt, and how long shutdown waits for the
	// messages in hand. Default 60s: longer than a handler's own database
	// transaction may take (participant.TxTimeout, 30s), so the dead
	// letters that follow a long batch still have time.
	HandleTimeout time.Duration
	// InstanceID, when set, makes this member static (KIP-345): an
	// instance that restarts under the same id after a crash gets its
	// partitions back at once, without a rebalance. A deliberate stop
	// removes the member, so its partitions move on at once too. Each
	// instance needs its own stable id (see InstanceID); two live members
	// with one id fence each other. Empty: dynamic membership.
	InstanceID string
	// Ensure, when set, creates the given subscribed topics, found missing
	// under the running group (deleted), with the service's own settings.
	Ensure func(ctx context.Context, topics []string) error
	// WatchEvery is how often the lag and missing-topic gauges are read
	// from the cluster. Default 5s.
	WatchEvery time.Duration
}

// Validate reports a missing setting.
func (c Config) Validate() error {
	switch {
	case len(c.Kafka.Brokers) == 0:
		return errors.New("consumer: no brokers")
	case c.GroupID == "":
		return errors.New("consumer: no group id")
	case len(c.Topics) == 0:
		return errors.New("consumer: no topics")
	case (c.Handler == nil) == (c.Batch == nil):
		return errors.New("consumer: set one of Handler and Batch")
	case c.DeadLetter == nil:
		return errors.New("consumer: no dead-letter function")
	}
	return nil
}

// Group consumes Config.Topics as one member of Config.GroupID.
//
// The handler is trusted with one rule: return nil only after the message's
// effects are committed. A transient error is retried with backoff for as
// long as it takes; an error wrapped with Permanent goes to
// Config.DeadLetter and its offset is marked. On shutdown the message in
// hand is finished and its offset marked. A BatchHandler gets the messages
// a partition has ready, retried whole; a permanent failure ends the batch,
// and the messages after it come again as the next one, so they see what
// the dead letter changed.
type Group struct {
	cfg   Config
	log   *slog.Logger
	batch BatchHandler // cfg.Batch, or cfg.Handler one message at a time
	max   int          // messages per batch

	generation atomic.Int32 // of the current session; 0 before the first
	partitions atomic.Int32 // claimed in the current session

	mu          sync.Mutex // guards what Ready reads
	inSession   bool
	lastSession time.Time // when the last session ended, or now while in one
	lastErr     error     // why the last Consume returned
	missing     int       // subscribed topics found missing by watch

	connMu sync.Mutex
	conn   *clusterConn // see cluster

	memberID string      // the coordinator's id of this member, from the last session
	fenced   atomic.Bool // another process joined under InstanceID

	crash          bool          // tests: stop as a killed process would, without leaving
	sessionTimeout time.Duration // tests: other than sarama's 10s
}

// Assigned returns the generation of the group this member last joined and
// how many partitions it holds. A static member that restarts keeps the
// generation: no rebalance happened.
func (g *Group) Assigned() (generation int32, partitions int) {
	return g.generation.Load(), int(g.partitions.Load())
}

// New returns a Group, or an error if cfg is incomplete.
func New(cfg Config) (*Group, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.HandleTimeout <= 0 {
		cfg.HandleTimeout = 60 * time.Second
	}
	if cfg.WatchEvery <= 0 {
		cfg.WatchEvery = 5 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, log: cfg.Logger.With("component", "consumer", "group", cfg.GroupID), batch: cfg.Batch, max: cfg.MaxBatch}
	if g.batch == nil {
		g.batch, g.max = one{cfg.Handler}, 1
	} else if g.max <= 0 {
		g.max = 32
	}
	return g, nil
}

// Run consumes until ctx ends, rejoining the group after every rebalance and
// reconnecting after broker outages. It returns nil after a clean shutdown.
func (g *Group) Run(ctx context.Context) error {
	sc, err := g.cfg.Kafka.Config(g.cfg.GroupID)
	if err != nil {
		return fmt.Errorf("consumer: group %s: %w", g.cfg.GroupID, err)
	}
	sc.Consumer.Group.InstanceId = g.cfg.InstanceID
	if g.sessionTimeout > 0 {
		sc.Consumer.Group.Session.Timeout = g.sessionTimeout
	}
	cg, err := sarama.NewConsumerGroup(g.cfg.Kafka.Brokers, g.cfg.GroupID, sc)
	if err != nil {
		return fmt.Errorf("consumer: join group %s: %w", g.cfg.GroupID, err)
	}
	go func() {
		for err := range cg.Errors() {
			g.log.Warn("consumer group error", "err", err)
		}
	}()
	joined.WithLabelValues(g.cfg.GroupID).Set(0)
	defer g.dropCluster()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { g.watch(watchCtx) })
	defer func() { stopWatch(); watching.Wait() }()

	for ctx.Err() == nil {
		// Consume returns at every rebalance; loop to rejoin.
		err := cg.Consume(ctx, g.cfg.Topics, g)
		g.mu.Lock()
		g.lastErr = err
		g.mu.Unlock()
		if err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			if errors.Is(err, sarama.ErrFencedInstancedId) && !g.fenced.Swap(true) {
				g.log.Error("another live process has joined the group under this instance id: this one consumes nothing while it runs; give each instance its own KAFKA_GROUP_INSTANCE_ID", "instance", g.cfg.InstanceID)
			}
			g.log.Warn("consume ended; rejoining", "err", err)
			sleep(ctx, time.Second)
		}
	}
	// The watcher shares the admin connection leave uses: stop it first.
	stopWatch()
	watching.Wait()
	// Consume committed the marked offsets when its session ended. A dynamic
	// member's Close leaves the group, so its partitions move on at once; a
	// static member's does not (KIP-345), so leave removes it.
	if err := cg.Close(); err != nil {
		return fmt.Errorf("consumer: close group %s: %w", g.cfg.GroupID, err)
	}
	if g.cfg.InstanceID != "" && !g.crash {
		if err := g.leave(); err != nil {
			g.log.Warn("static member not removed: its partitions wait for its session to time out", "err", err)
		} else {
			g.log.Info("static member removed from the group", "instance", g.cfg.InstanceID)
		}
	}
	g.log.Info("consumer stopped")
	return nil
}

// Setup implements sarama.ConsumerGroupHandler.
func (g *Group) Setup(s sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range s.Claims() {
		n += len(ps)
	}
	g.generation.Store(s.GenerationID())
	g.partitions.Store(int32(n))
	g.mu.Lock()
	g.memberID = s.MemberID()
	g.mu.Unlock()
	g.fenced.Store(false)
	g.session(true)
	g.log.Info("partitions assigned", "claims", s.Claims(), "generation", s.GenerationID(), "instance", g.cfg.InstanceID)
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (g *Group) Cleanup(s sarama.ConsumerGroupSession) error {
	g.partitions.Store(0)
	g.session(false)
	g.log.Info("partitions revoked", "generation", s.GenerationID())
	return nil
}

// session records whether the member is in a session, for Ready and the
// joined gauge.
func (g *Group) session(in bool) {
	g.mu.Lock()
	g.inSession, g.lastSession = in, time.Now()
	g.mu.Unlock()
	v := 0.0
	if in {
		v = 1
	}
	joined.WithLabelValues(g.cfg.GroupID).Set(v)
}

// ConsumeClaim implements sarama.ConsumerGroupHandler. Messages of one
// partition are handled in order: one at a time, or in batches of those
// ready (see Config.MaxBatch).
func (g *Group) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			// select picks at random among ready cases, so a buffered
			// message can win over an ended session. Once shutdown or a
			// rebalance has begun, start nothing new: the message stays
			// unmarked for the partition's next owner, while one started
			// now could hold shutdown up for a whole HandleTimeout.
			if s.Context().Err() != nil {
				return nil
			}
			for batch := g.collect(m, claim.Messages()); len(batch) > 0; {
				rest, err := g.process(s.Context(), batch)
				if err != nil {
					// The session ended while retrying (or the handler broke
					// its contract): the batch is left unmarked and the next
					// owner of the partition gets it.
					if s.Context().Err() == nil {
						g.log.Error("batch abandoned", "err", err)
					}
					return nil
				}
				done := batch[len(batch)-len(rest)-1]
				s.MarkMessage(done, "")
				if len(rest) > 0 && s.Context().Err() != nil {
					return nil // as above: the rest is the next owner's
				}
				batch = rest
			}
		}
	}
}

// collect returns first and the messages already waiting behind it, up to
// the batch size. It never waits: a batch is what the fetch delivered.
func (g *Group) collect(first *sarama.ConsumerMessage, more <-chan *sarama.ConsumerMessage) []*sarama.ConsumerMessage {
	batch := []*sarama.ConsumerMessage{first}
	for len(batch) < g.max {
		select {
		case m, ok := <-more:
			if !ok {
				return batch
			}
			batch = append(batch, m)
		default:
			return batch
		}
	}
	return batch
}

// process handles a batch until it succeeds or ends at a failure, which it
// dead-letters. It returns the messages after the failure, not yet
// handled, and an error only if sessCtx ended first.
func (g *Group) process(sessCtx context.Context, batch []*sarama.ConsumerMessage) (rest []*sarama.ConsumerMessage, err error) {
	first, last := batch[0], batch[len(batch)-1]
	log := g.log.With("topic", first.Topic, "partition", first.Partition, "offset", first.Offset)
	if len(batch) == 1 {
		log = log.With("order_id", string(first.Key))
	} else {
		log = log.With("last_offset", last.Offset, "messages", len(batch))
	}
	attempt := func() (struct{}, error) {
		// An attempt already running is allowed to finish after shutdown
		// begins, so in-flight work completes and its offset is committed.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(sessCtx), g.cfg.HandleTimeout)
		defer cancel()
		f, err := g.batch.HandleBatch(ctx, batch)
		if err != nil {
			log.Warn("handler failed; will retry", "err", err)
			retries.WithLabelValues(g.cfg.GroupID, first.Topic).Inc()
			return struct{}{}, err
		}
		rest = nil
		if f == nil {
			return struct{}{}, nil
		}
		i := slices.Index(batch, f.Msg)
		if i < 0 {
			return struct{}{}, backoff.Permanent(fmt.Errorf("consumer: the batch handler failed a message not in its batch (%s/%d/%d)", f.Msg.Topic, f.Msg.Partition, f.Msg.Offset))
		}
		flog := g.log.With("topic", f.Msg.Topic, "partition", f.Msg.Partition, "offset", f.Msg.Offset, "order_id", string(f.Msg.Key))
		flog.Error("message cannot be processed; dead-lettering", "reason", f.Err)
		if dlErr := g.cfg.DeadLetter(ctx, f.Msg, f.Err); dlErr != nil {
			// The whole batch is retried: what it applied is now a
			// duplicate, skipped; the failure fails again.
			flog.Error("dead-letter failed; will retry", "err", dlErr)
			retries.WithLabelValues(g.cfg.GroupID, f.Msg.Topic).Inc()
			return struct{}{}, dlErr
		}
		deadLetters.WithLabelValues(g.cfg.GroupID, f.Msg.Topic).Inc()
		rest = batch[i+1:]
		return struct{}{}, nil
	}
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval = 100 * time.Millisecond
	eb.MaxInterval = g.cfg.MaxBackoff
	_, err = backoff.Retry(sessCtx, attempt, backoff.WithBackOff(eb), backoff.WithMaxElapsedTime(0))
	return rest, err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
