package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// TestNaiveChargesTwiceChoreoDoesNot runs the demo small: the naive
// check-then-act consumer must overcharge under concurrent delivery, and
// the payment service's handler must charge every order exactly once.
//
// The naive consumer's doubling is a race, not a scripted interleaving: the
// copies of an event are released at the same moment, and each passes the
// SELECT while the others' INSERT is uncommitted. Work (5 ms, a card
// processor's round trip) widens that window, so that 20 concurrently
// delivered orders double with near certainty; Choreo's result does not
// depend on timing at all.
func TestNaiveChargesTwiceChoreoDoesNot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := testenv.OwnDatabase(t)
	cfg := Config{
		Kafka: testenv.Kafka(t), DatabaseURL: dbURL,
		Orders: 40, Seed: 7, Copies: 3, ConcurrentShare: 0.5, Work: 5 * time.Millisecond,
		Logger: testenv.Logger(t),
	}
	var out bytes.Buffer
	rep, err := Run(ctx, cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}

	// The same deliveries reached both: every event twice on the topic,
	// and 20 orders' first copies to three handlers at once.
	if rep.Messages != 80 || rep.ConcurrentOrders != 20 {
		t.Fatalf("messages %d, concurrent orders %d; want 80, 20", rep.Messages, rep.ConcurrentOrders)
	}
	for _, s := range []Side{rep.Naive, rep.Choreo} {
		if s.Deliveries != 80+40 || s.Concurrent != 40 {
			t.Errorf("%s: %d deliveries (%d concurrent copies), want 120 (40)", s.Name, s.Deliveries, s.Concurrent)
		}
		if s.Owed <= 0 {
			t.Errorf("%s: owed %d", s.Name, s.Owed)
		}
	}

	n := rep.Naive
	if n.OrdersDoubled == 0 || n.CustomersOvercharged == 0 || n.Taken <= n.Owed {
		t.Errorf("naive consumer did not double: %d orders doubled, %d customers overcharged, taken %d of %d owed",
			n.OrdersDoubled, n.CustomersOvercharged, n.Taken, n.Owed)
	}
	// Sequential redeliveries find the committed payment: the naive check
	// works there, and fails only under concurrency.
	if n.Duplicates < 40 {
		t.Errorf("naive consumer recognised %d duplicates, want at least the 40 redelivered copies", n.Duplicates)
	}

	c := rep.Choreo
	if c.OrdersDoubled != 0 || c.CustomersOvercharged != 0 || c.Debits != 40 || c.Taken != c.Owed || c.Emitted != 40 {
		t.Errorf("choreo: %d debits, %d orders doubled, %d customers overcharged, taken %d of %d owed, %d PaymentCompleted; want 40, 0, 0, equal, 40",
			c.Debits, c.OrdersDoubled, c.CustomersOvercharged, c.Taken, c.Owed, c.Emitted)
	}
	if c.Duplicates != 80 {
		t.Errorf("choreo skipped %d duplicates, want 80 (40 redelivered + 40 concurrent copies)", c.Duplicates)
	}
	if err := rep.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if !strings.Contains(out.String(), "choreo doubled=0 (ok)") {
		t.Errorf("output lacks the verdict line")
	}

	// It cleaned up after itself.
	db, err := pg.Open(ctx, dbURL, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runID := strings.TrimPrefix(rep.Topic, "incident.")
	var left int
	if err := db.GetContext(ctx, &left,
		`SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE $1`, "incident_"+runID+"%"); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d schemas of run %s left behind", left, runID)
	}
}

// TestCommandExitsNonZeroOnlyIfChoreoDoubles runs the command as a user
// does, from flags and the environment, and checks the exit decision.
func TestCommandExitsNonZeroOnlyIfChoreoDoubles(t *testing.T) {
	env := map[string]string{
		"KAFKA_BROKERS":       strings.Join(testenv.Kafka(t).Brokers, ","),
		"KAFKA_USERNAME":      testenv.Kafka(t).Username,
		"KAFKA_PASSWORD":      testenv.Kafka(t).Password,
		"KAFKA_PASSWORD_FILE": testenv.Kafka(t).PasswordFile,
		"TEST_DATABASE_URL":   testenv.OwnDatabase(t),
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-orders", "12", "-seed", "3"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "choreo doubled=0 (ok)") {
		t.Errorf("output:\n%s", out.String())
	}

	ok := Report{Orders: 2, Choreo: Side{Debits: 2, Taken: 300, Owed: 300, Emitted: 2}}
	if err := ok.Check(); err != nil {
		t.Errorf("Check of a clean report: %v", err)
	}
	for name, bad := range map[string]Report{
		"doubled order":       {Orders: 2, Choreo: Side{Debits: 3, OrdersDoubled: 1, Taken: 400, Owed: 300, Emitted: 2}},
		"overcharged balance": {Orders: 2, Choreo: Side{Debits: 2, CustomersOvercharged: 1, Taken: 400, Owed: 300, Emitted: 2}},
		"missed order":        {Orders: 2, Choreo: Side{Debits: 1, Taken: 100, Owed: 300, Emitted: 1}},
	} {
		if bad.Check() == nil {
			t.Errorf("Check passed a report with a %s", name)
		}
	}
}
