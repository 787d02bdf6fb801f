package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

// measure reads one side's ledger and balances into s: the ledger says
// which orders it recorded charges for, the balances — independently —
// how much it took from whom.
func measure(ctx context.Context, db *sqlx.DB, orders []order, ledger string, s *Side) error {
	var charged []string
	if err := db.SelectContext(ctx, &charged, ledger); err != nil {
		return fmt.Errorf("%s: read ledger: %w", s.Name, err)
	}
	s.Debits = len(charged)
	perOrder := map[string]int{}
	for _, id := range charged {
		perOrder[id]++
		if perOrder[id] == 2 {
			s.OrdersDoubled++
		}
	}
	owed := map[string]int64{}
	for _, o := range orders {
		owed[o.customer] += o.total
		s.Owed += o.total
	}
	var balances []struct {
		Customer string `db:"customer_id"`
		Balance  int64  `db:"balance"`
	}
	if err := db.SelectContext(ctx, &balances, `SELECT customer_id, balance FROM accounts`); err != nil {
		return fmt.Errorf("%s: read balances: %w", s.Name, err)
	}
	for _, b := range balances {
		taken := initialBalance - b.Balance
		s.Taken += taken
		if taken > owed[b.Customer] {
			s.CustomersOvercharged++
		}
	}
	return nil
}

func (r Report) print(out io.Writer, cfg Config) {
	fmt.Fprintf(out, "incident: %d orders of %d customers (seed %d), topic %s\n", r.Orders, r.Customers, cfg.Seed, r.Topic)
	fmt.Fprintf(out, "  Kafka: each OrderCreated produced, then produced again unchanged (same event id, as after a lost offset commit): %d messages\n", r.Messages)
	fmt.Fprintf(out, "  concurrency: the first delivery of %d orders goes to %d handlers at once (a partition's old owner still at work after a rebalance, a retry racing the first attempt)\n",
		r.ConcurrentOrders, cfg.Copies)
	fmt.Fprintf(out, "  naive consumer's work between its check and its write: %v\n\n", cfg.Work)
	row := func(label string, naive, choreo string) { fmt.Fprintf(out, "%-30s %22s %24s\n", label, naive, choreo) }
	n, c := r.Naive, r.Choreo
	row("", "naive check-then-act", "choreo payment handler")
	row("orders", num(int64(r.Orders)), num(int64(r.Orders)))
	row("deliveries", num(int64(n.Deliveries)), num(int64(c.Deliveries)))
	row("  of which redelivered copies", num(int64(r.Messages-r.Orders)), num(int64(r.Messages-r.Orders)))
	row("  of which concurrent copies", num(int64(n.Concurrent)), num(int64(c.Concurrent)))
	row("duplicates recognised", num(n.Duplicates), num(c.Duplicates))
	row("retried after an error", num(n.Retries), num(c.Retries))
	row("debits applied", num(int64(n.Debits)), num(int64(c.Debits)))
	row("orders charged twice or more", num(int64(n.OrdersDoubled)), num(int64(c.OrdersDoubled)))
	row("customers charged twice", num(int64(n.CustomersOvercharged)), num(int64(c.CustomersOvercharged)))
	row("money owed (JPY)", num(n.Owed), num(c.Owed))
	row("money taken (JPY)", num(n.Taken), num(c.Taken))
	row("overcharged (JPY)", num(n.Taken-n.Owed), num(c.Taken-c.Owed))
	row("PaymentCompleted queued", "-", num(int64(c.Emitted)))
	row("elapsed", n.Elapsed.Round(time.Millisecond).String(), c.Elapsed.Round(time.Millisecond).String())
	verdict := "ok"
	if err := r.Check(); err != nil {
		verdict = "FAIL: " + err.Error()
	}
	fmt.Fprintf(out, "\nrun took %v, set-up included\n", r.Total.Round(time.Millisecond))
	fmt.Fprintf(out, "incident: naive doubled=%d choreo doubled=%d (%s)\n", n.OrdersDoubled, c.OrdersDoubled, verdict)
}

// num formats n with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
