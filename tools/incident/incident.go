package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/idem"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/payment"
)

// Config is one run of the demo.
type Config struct {
	Kafka       broker.Conn
	DatabaseURL string
	// Orders is how many OrderCreated events are produced.
	Orders int
	// Seed fixes the orders: ids, event ids, customers, amounts, and which
	// orders are delivered concurrently. (Which of two racing handlers wins
	// is up to the scheduler and PostgreSQL, not the seed.)
	Seed uint64
	// Copies is how many handlers receive a concurrently delivered event
	// at the same moment.
	Copies int
	// ConcurrentShare is the share of orders whose first delivery goes to
	// Copies handlers at once.
	ConcurrentShare float64
	// Work is what the naive consumer does between its check and its
	// write, standing for a card processor's round trip.
	Work time.Duration
	// Logger receives the payment handler's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig is what the command runs without flags. Work is 0: the
// naive consumer doubles without any help from an artificial delay.
func DefaultConfig() Config {
	return Config{Orders: 200, Seed: 1, Copies: 3, ConcurrentShare: 0.25}
}

func (c Config) validate() error {
	switch {
	case c.Orders < 1:
		return errors.New("-orders must be at least 1")
	case c.Copies < 2:
		return errors.New("-copies must be at least 2")
	case c.ConcurrentShare < 0 || c.ConcurrentShare > 1:
		return errors.New("-concurrent must be between 0 and 1")
	case c.Work < 0:
		return errors.New("-work must not be negative")
	case c.DatabaseURL == "":
		return errors.New("no database URL")
	}
	return c.Kafka.Validate()
}

// initialBalance is every customer's opening balance: enough for every
// order of the run several times over, so no charge is ever declined and
// every extra debit shows in the balance.
const initialBalance = 1_000_000_000

// order is one generated order.
type order struct {
	id, customer string
	total        int64
}

// Side is what one consumer did with the deliveries.
type Side struct {
	Name string
	// Deliveries is how many times the handler was called, Concurrent of
	// them as extra copies of an event handed to several handlers at once.
	Deliveries, Concurrent int
	// Duplicates is how many deliveries the consumer recognised as already
	// applied.
	Duplicates int64
	// Retries is how many deliveries failed and were handed again, as the
	// consumer group does with a transient error.
	Retries int64
	// Debits is how many charges the ledger (payments) holds.
	Debits int
	// OrdersDoubled is how many orders the ledger holds more than one
	// charge for.
	OrdersDoubled int
	// CustomersOvercharged is how many customers' balances dropped by more
	// than their orders' totals: read from the balances, not the ledger.
	CustomersOvercharged int
	// Taken is the sum of every balance's drop; Owed the sum of the
	// totals of the orders.
	Taken, Owed int64
	// Emitted is how many PaymentCompleted events the consumer queued
	// (Choreo's outbox); -1 where not applicable.
	Emitted int
	Elapsed time.Duration
}

// Doubled reports whether the side charged anyone more than owed.
func (s Side) Doubled() bool {
	return s.OrdersDoubled > 0 || s.CustomersOvercharged > 0 || s.Taken > s.Owed
}

// Report is the outcome of a run.
type Report struct {
	Orders, Customers int
	Topic             string
	// Messages is how many messages the consumers read from the topic: each
	// order's OrderCreated twice (the original and the redelivered copy).
	Messages int
	// ConcurrentOrders is how many orders' events were handed to several
	// handlers at once.
	ConcurrentOrders int
	Naive, Choreo    Side
	// Total is the whole run's time, set-up included (clean-up is not).
	Total time.Duration
}

// Check returns an error if Choreo's side charged anyone twice, missed an
// order, or took other than what it is owed.
func (r Report) Check() error {
	c := r.Choreo
	var errs []error
	if c.Doubled() {
		errs = append(errs, fmt.Errorf("choreo charged twice: %d orders doubled in the ledger, %d customers overcharged, taken %d of %d owed",
			c.OrdersDoubled, c.CustomersOvercharged, c.Taken, c.Owed))
	}
	if c.Debits != r.Orders || c.Taken != c.Owed {
		errs = append(errs, fmt.Errorf("choreo charged %d of %d orders, taken %d of %d owed", c.Debits, r.Orders, c.Taken, c.Owed))
	}
	if c.Emitted != r.Orders {
		errs = append(errs, fmt.Errorf("choreo queued %d PaymentCompleted for %d orders", c.Emitted, r.Orders))
	}
	return errors.Join(errs...)
}

// Run produces the orders' events, redelivers them, feeds the same
// messages to both consumers, prints the comparison to out and returns it.
// It removes its topic and schemas before it returns.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	var rep Report
	begin := time.Now()
	if err := cfg.validate(); err != nil {
		return rep, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runID := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	rep.Topic = "incident." + runID

	// 1. The orders, from the seed.
	var seed [32]byte
	for i := range 8 {
		seed[i] = byte(cfg.Seed >> (8 * i))
	}
	src := rand.NewChaCha8(seed)
	rng := rand.New(src)
	customers := max(1, cfg.Orders/4)
	orders, values, err := makeOrders(cfg.Orders, customers, rng, src)
	if err != nil {
		return rep, err
	}
	rep.Orders, rep.Customers = len(orders), customers
	concurrent := map[string]bool{}
	nConcurrent := int(cfg.ConcurrentShare*float64(len(orders)) + 0.5)
	for _, i := range rng.Perm(len(orders))[:nConcurrent] {
		concurrent[orders[i].id] = true
	}
	rep.ConcurrentOrders = nConcurrent

	// 2. Kafka: produce every OrderCreated, then redeliver every message
	// as read back — same key, value and headers, so the same event id.
	msgs, err := produceTwice(ctx, cfg.Kafka, rep.Topic, orders, values)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := deleteTopic(dctx, cfg.Kafka, rep.Topic); err != nil {
			log.Warn("topic not deleted", "topic", rep.Topic, "err", err)
		}
	}()
	if err != nil {
		return rep, err
	}
	for _, part := range msgs {
		rep.Messages += len(part)
	}

	// 3. PostgreSQL: a schema for each side.
	naiveDB, err := ownSchema(ctx, cfg.DatabaseURL, "incident_"+runID+"_naive", log)
	if err != nil {
		return rep, err
	}
	defer naiveDB.Close()
	choreoDB, err := ownSchema(ctx, cfg.DatabaseURL, "incident_"+runID+"_choreo", log)
	if err != nil {
		return rep, err
	}
	defer choreoDB.Close()
	if _, err := naiveDB.ExecContext(ctx, naiveSchema); err != nil {
		return rep, fmt.Errorf("naive schema: %w", err)
	}
	// The payment service's own schema, as participant.Run applies it.
	if err := pg.Migrate(ctx, choreoDB.DB, log, idem.Schema, outbox.Schema, park.Schema, payment.Schema); err != nil {
		return rep, err
	}
	for _, db := range []*sqlx.DB{naiveDB.DB, choreoDB.DB} {
		if err := openAccounts(ctx, db, orders); err != nil {
			return rep, err
		}
	}

	// 4. The naive consumer.
	naive := &naiveConsumer{db: naiveDB.DB, work: cfg.Work}
	rep.Naive = Side{Name: "naive check-then-act", Emitted: -1}
	start := time.Now()
	rep.Naive.Deliveries, rep.Naive.Concurrent, err = deliver(ctx, msgs, concurrent, cfg.Copies, naive.handle, &rep.Naive.Retries)
	rep.Naive.Elapsed = time.Since(start)
	if err != nil {
		return rep, fmt.Errorf("naive consumer: %w", err)
	}
	rep.Naive.Duplicates = naive.skipped.Load()

	// 5. Choreo: the payment service's own handler, as its consumer group
	// runs it (participant.Spec.Handler).
	spec, err := payment.Spec(payment.DefaultConfig())
	if err != nil {
		return rep, err
	}
	dups := newCountingHandler(log.Handler(), "duplicate event skipped")
	h := spec.Handler(choreoDB.DB, slog.New(dups))
	// The demo's topic stands in for order.events, so that a running
	// system never sees these events; the handler's Guard checks the
	// topic, so it gets the message under the name it is produced to.
	choreo := func(ctx context.Context, m *sarama.ConsumerMessage) error {
		cp := *m
		cp.Topic = events.TopicOrder
		return h.Handle(ctx, &cp)
	}
	rep.Choreo = Side{Name: "choreo (payment.Spec handler)"}
	start = time.Now()
	rep.Choreo.Deliveries, rep.Choreo.Concurrent, err = deliver(ctx, msgs, concurrent, cfg.Copies, choreo, &rep.Choreo.Retries)
	rep.Choreo.Elapsed = time.Since(start)
	if err != nil {
		return rep, fmt.Errorf("choreo consumer: %w", err)
	}
	rep.Choreo.Duplicates = dups.n.Load()

	// 6. Count.
	if err := measure(ctx, naiveDB.DB, orders, `SELECT order_id FROM payments`, &rep.Naive); err != nil {
		return rep, err
	}
	if err := measure(ctx, choreoDB.DB, orders, `SELECT order_id FROM payments WHERE status = 'COMPLETED'`, &rep.Choreo); err != nil {
		return rep, err
	}
	if err := choreoDB.GetContext(ctx, &rep.Choreo.Emitted,
		`SELECT count(*) FROM outbox WHERE headers->>'event_type' = $1`, events.TypePaymentCompleted); err != nil {
		return rep, fmt.Errorf("count outbox: %w", err)
	}
	rep.Total = time.Since(begin)
	rep.print(out, cfg)
	return rep, nil
}

// makeOrders returns the orders and their encoded OrderCreated events.
// Ids come from src, so one seed gives the same orders and event ids.
func makeOrders(n, customers int, rng *rand.Rand, src *rand.ChaCha8) ([]order, [][]byte, error) {
	orders := make([]order, n)
	values := make([][]byte, n)
	occurred := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC) // 3 a.m.
	for i := range orders {
		oid, err := uuid.NewRandomFromReader(src)
		if err != nil {
			return nil, nil, err
		}
		eid, err := uuid.NewRandomFromReader(src)
		if err != nil {
			return nil, nil, err
		}
		qty, price := int64(1+rng.IntN(3)), int64(500+100*rng.IntN(46))
		o := order{id: oid.String(), customer: fmt.Sprintf("customer-%03d", rng.IntN(customers)), total: qty * price}
		e, err := events.New("order", o.id, events.OrderCreated{
			CustomerID:      o.customer,
			Items:           []events.Item{{SKU: fmt.Sprintf("SKU-%d", 1+rng.IntN(9)), Quantity: qty, UnitPrice: price}},
			TotalAmount:     o.total,
			Currency:        "JPY",
			ShippingAddress: events.Address{Country: "JP", PostalCode: "100-0001", Line1: "1-1 Chiyoda"},
		}, occurred.Add(time.Duration(i)*time.Second))
		if err != nil {
			return nil, nil, err
		}
		e.ID = eid.String()
		v, err := e.Encode()
		if err != nil {
			return nil, nil, err
		}
		orders[i], values[i] = o, v
	}
	return orders, values, nil
}

// produceTwice creates topic, produces each order's event, reads the
// messages back and produces each again with broker.Redelivery, as a
// broker presents it after a lost offset commit. It returns everything
// the topic then holds, by partition in offset order: originals first,
// then the copies.
func produceTwice(ctx context.Context, conn broker.Conn, topic string, orders []order, values [][]byte) (map[int32][]*sarama.ConsumerMessage, error) {
	if err := broker.EnsureTopics(ctx, conn, "incident", topic); err != nil {
		return nil, err
	}
	// A topic made a moment ago may not be led yet on a fresh broker.
	if err := broker.WaitServed(ctx, conn, topic); err != nil {
		return nil, err
	}
	p, err := conn.NewSyncProducer("incident")
	if err != nil {
		return nil, err
	}
	defer p.Close()
	first := make([]*sarama.ProducerMessage, len(orders))
	for i, o := range orders {
		e, _, err := events.Decode(values[i])
		if err != nil {
			return nil, err
		}
		first[i] = &sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(o.id), Value: sarama.ByteEncoder(values[i]),
			Headers: []sarama.RecordHeader{
				{Key: []byte(events.HeaderEventID), Value: []byte(e.ID)},
				{Key: []byte(events.HeaderEventType), Value: []byte(e.Type)},
			},
		}
	}
	if err := p.SendMessages(first); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	read, err := readTopic(ctx, conn, topic, len(orders))
	if err != nil {
		return nil, err
	}
	var again []*sarama.ProducerMessage
	for _, part := range read {
		for _, m := range part {
			again = append(again, broker.Redelivery(m))
		}
	}
	if err := p.SendMessages(again); err != nil {
		return nil, fmt.Errorf("redeliver: %w", err)
	}
	return readTopic(ctx, conn, topic, 2*len(orders))
}

// readTopic reads every partition of topic from its oldest offset to its
// end, and fails unless it holds want messages.
func readTopic(ctx context.Context, conn broker.Conn, topic string, want int) (map[int32][]*sarama.ConsumerMessage, error) {
	out, err := broker.Messages(ctx, conn, topic)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, part := range out {
		total += len(part)
	}
	if total != want {
		return nil, fmt.Errorf("topic %s holds %d messages, want %d", topic, total, want)
	}
	return out, nil
}

func deleteTopic(ctx context.Context, conn broker.Conn, topic string) error {
	admin, err := conn.NewClusterAdmin("incident")
	if err != nil {
		return err
	}
	defer admin.Close()
	err = admin.DeleteTopic(topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return nil
	}
	return err
}

// ownSchema creates schema in the database at base and returns a
// connection pool whose search_path is that schema. Its Close drops the
// schema with everything in it.
func ownSchema(ctx context.Context, base, schema string, log *slog.Logger) (*schemaDB, error) {
	admin, err := pg.Open(ctx, base, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+pq.QuoteIdentifier(schema)); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		admin.Close()
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", schema) // lib/pq passes it on as a run-time parameter
	u.RawQuery = q.Encode()
	db, err := pg.Open(ctx, u.String(), 10*time.Second)
	if err != nil {
		dropSchema(admin, schema, log)
		admin.Close()
		return nil, err
	}
	return &schemaDB{DB: db, admin: admin, schema: schema, log: log}, nil
}

// schemaDB is a pool confined to a schema that Close drops.
type schemaDB struct {
	*sqlx.DB
	admin  *sqlx.DB
	schema string
	log    *slog.Logger
}

func (s *schemaDB) Close() error {
	s.DB.Close()
	dropSchema(s.admin, s.schema, s.log)
	return s.admin.Close()
}

func dropSchema(admin *sqlx.DB, schema string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+pq.QuoteIdentifier(schema)+` CASCADE`); err != nil {
		log.Warn("schema not dropped", "schema", schema, "err", err)
	}
}

// openAccounts opens every customer's account, in yen, with
// initialBalance, as PUT /accounts/{id} does.
func openAccounts(ctx context.Context, db *sqlx.DB, orders []order) error {
	seen := map[string]bool{}
	for _, o := range orders {
		if seen[o.customer] {
			continue
		}
		seen[o.customer] = true
		if _, err := db.ExecContext(ctx,
			`INSERT INTO accounts (customer_id, balance, currency) VALUES ($1, $2, 'JPY')`, o.customer, initialBalance); err != nil {
			return fmt.Errorf("open account %s: %w", o.customer, err)
		}
	}
	return nil
}
