package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/pkg/consumer"
	"github.com/choreo-saga/choreo/pkg/events"
)

// naiveSchema is what the consumer of the seed incident had: a ledger of
// payments with an index on order_id but no unique constraint, so nothing
// in the database decides whether an order was charged — the code does,
// with a SELECT.
const naiveSchema = `
CREATE TABLE accounts (
    customer_id text   PRIMARY KEY,
    balance     bigint NOT NULL,
    currency    text   NOT NULL
);
CREATE TABLE payments (
    id          bigserial   PRIMARY KEY,
    order_id    text        NOT NULL,
    customer_id text        NOT NULL,
    amount      bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_order_id ON payments (order_id);
`

// naiveConsumer is the classic check-then-act consumer: "if this order has
// no payment yet, debit and record one". It even runs in one transaction,
// at PostgreSQL's default isolation, READ COMMITTED. A redelivery that
// arrives after the first delivery committed finds the payment and is
// skipped. One that arrives while the first is still between its check and
// its commit — the old owner of a partition still working on the message
// when the rebalance hands it to the new owner, or two copies in flight at
// once — does not see the uncommitted row, passes the check too, and
// charges again: its UPDATE waits for the first transaction's row lock on
// the account, then debits the committed, already debited balance.
type naiveConsumer struct {
	db      *sqlx.DB
	work    time.Duration
	skipped atomic.Int64
}

func (c *naiveConsumer) handle(ctx context.Context, m *sarama.ConsumerMessage) error {
	e, p, err := events.Decode(m.Value)
	if err != nil {
		return consumer.Permanent(err)
	}
	o, ok := p.(events.OrderCreated)
	if !ok {
		return nil
	}
	tx, err := c.db.BeginTxx(ctx, nil) // READ COMMITTED
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	// Check…
	var charged bool
	if err := tx.GetContext(ctx, &charged, `SELECT EXISTS (SELECT 1 FROM payments WHERE order_id = $1)`, e.OrderID); err != nil {
		return err
	}
	if charged {
		c.skipped.Add(1)
		return tx.Commit()
	}
	// …work (the card processor's round trip)…
	if c.work > 0 {
		select {
		case <-time.After(c.work):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// …then act.
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $2 WHERE customer_id = $1`, o.CustomerID, o.TotalAmount); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payments (order_id, customer_id, amount) VALUES ($1, $2, $3)`,
		e.OrderID, o.CustomerID, o.TotalAmount); err != nil {
		return err
	}
	return tx.Commit()
}

// deliver hands msgs to handle as a consumer group does, plus the
// concurrency a rebalance adds: one goroutine per partition, in offset
// order, each message once the previous one is done. The first delivery of
// each order in concurrent goes to copies handlers released at the same
// moment (start barrier); all of them finish before the partition moves on.
// A handler that fails transiently is called again, as the consumer group
// retries; a permanent failure ends the run.
//
// It returns the deliveries (handler calls, retries not counted) and how
// many of them were extra concurrent copies.
func deliver(ctx context.Context, msgs map[int32][]*sarama.ConsumerMessage, concurrent map[string]bool, copies int,
	handle func(context.Context, *sarama.ConsumerMessage) error, retries *int64) (deliveries, extra int, err error) {
	var nDeliveries, nExtra atomic.Int64
	once := func(ctx context.Context, m *sarama.ConsumerMessage) error {
		nDeliveries.Add(1)
		for attempt := 1; ; attempt++ {
			err := handle(ctx, m)
			if err == nil || consumer.IsPermanent(err) || attempt == 20 {
				return err
			}
			atomic.AddInt64(retries, 1)
			select {
			case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for p, part := range msgs {
		g.Go(func() error {
			seen := map[string]bool{}
			for _, m := range part {
				key := string(m.Key)
				first := !seen[key]
				seen[key] = true
				if !first || !concurrent[key] {
					if err := once(ctx, m); err != nil {
						return fmt.Errorf("partition %d offset %d: %w", p, m.Offset, err)
					}
					continue
				}
				start := make(chan struct{})
				errs := make([]error, copies)
				var wg sync.WaitGroup
				for i := range copies {
					wg.Go(func() {
						<-start
						errs[i] = once(ctx, m)
					})
				}
				nExtra.Add(int64(copies - 1))
				close(start)
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						return fmt.Errorf("partition %d offset %d (concurrent): %w", p, m.Offset, err)
					}
				}
			}
			return nil
		})
	}
	err = g.Wait()
	return int(nDeliveries.Load()), int(nExtra.Load()), err
}

// countingHandler counts the records logged with one message, e.g. the
// payment handler's "duplicate event skipped", and passes records on to
// the wrapped handler if it wants them.
type countingHandler struct {
	slog.Handler
	msg string
	n   *atomic.Int64
}

func newCountingHandler(h slog.Handler, msg string) *countingHandler {
	return &countingHandler{Handler: h, msg: msg, n: new(atomic.Int64)}
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(attrs), msg: h.msg, n: h.n}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), msg: h.msg, n: h.n}
}
