package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
)

// TestPoisonedOrderIsParkedThenReplayed: one order's step fails for good —
// its customer's account was switched to another currency by hand after the
// charge, so payment cannot credit the refund its cancel needs. Payment
// parks that order: the failure is dead-lettered with its reason, a later
// delivery of the order's events is parked behind it, not applied, and
// every other order keeps completing. choreoctl lists it; a replay before
// the fix fails and changes nothing; once the account is fixed, a replay
// applies the events parked behind it in order and the order ends CANCELLED
// with exactly one charge and one refund, every service agreeing. Replaying
// again is a no-op.
func TestPoisonedOrderIsParkedThenReplayed(t *testing.T) {
	ctl := buildChoreoctl(t)
	f := newFixture(t, 10000, 10)
	balanceBefore, stockBefore := balance(t, f.customer), stock(t, f.sku).Available

	restart := stopService(t, "inventory") // the saga waits after the charge
	o := createOrder(t, f.order(1, 1000, "JP"))
	waitRecord(t, "payment", "/payments/"+o.ID, "COMPLETED")
	setCurrency(t, f.customer, "EUR") // the poison: a bad hand-made data fix
	if status, _, _ := cancel(t, o.ID); status != http.StatusAccepted {
		t.Fatalf("POST /orders/%s/cancel = %d, want 202", o.ID, status)
	}
	restart()

	// Payment dead-letters the cancel it cannot refund, and parks the order.
	dead := eventuallyMessages(t, events.DeadLetterTopic("payment"), o.ID, 1)
	if r := header(dead[0], "dlq_reason"); !strings.Contains(r, "settle it by hand") {
		t.Fatalf("dead letter reason %q, want the refused refund", r)
	}
	// The broker delivers the order's OrderCancelRequested again: parked
	// behind it.
	var again []*sarama.ProducerMessage
	for _, m := range messagesFor(t, events.TopicOrder, o.ID) {
		if e, err := events.DecodeEnvelope(m.Value); err == nil && e.Type == events.TypeOrderCancelRequested {
			again = append(again, broker.Redelivery(m))
		}
	}
	if len(again) != 1 {
		t.Fatalf("%d OrderCancelRequested on %s for %s, want 1", len(again), events.TopicOrder, o.ID)
	}
	produce(t, again...)
	eventually(t, 30*time.Second, func() error {
		out := runCtl(t, ctl, "parked", "-order", o.ID)
		if n := strings.Count(out, events.TypeOrderCancelRequested); n != 2 || !strings.Contains(out, "parked behind the failure") || !strings.Contains(out, "settle it by hand") {
			return fmt.Errorf("choreoctl parked -order %s:\n%s\nwant the failure with its reason, then the copy parked behind it", o.ID, out)
		}
		return nil
	})
	t.Logf("choreoctl parked -order %s:\n%s", o.ID, runCtl(t, ctl, "parked", "-order", o.ID))
	if out := runCtl(t, ctl, "dead-letters"); !strings.Contains(out, o.ID) || strings.Contains(out, "parked behind") {
		t.Fatalf("choreoctl dead-letters:\n%s\nwant the failure of %s alone", out, o.ID)
	}

	// Other orders are not held up.
	other := newFixture(t, 10000, 10)
	wantOrder(t, createOrder(t, other.order(1, 1000, "JP")).ID, "COMPLETED", "")

	// Before the fix, a replay fails again and changes nothing.
	if out, err := ctlErr(ctl, "replay", "-service", "payment", "-order", o.ID); err == nil || !strings.Contains(out, "still fails") {
		t.Fatalf("replay before the fix: %v\n%s\nwant it refused: still fails", err, out)
	}
	assertEqual(t, "order status while parked", orderStatus(t, o.ID).Status, "CANCELLING")
	assertEqual(t, "balance while parked", balance(t, f.customer), balanceBefore-1000)

	setCurrency(t, f.customer, "JPY") // the fix
	out := runCtl(t, ctl, "replay", "-order", o.ID)
	if !strings.Contains(out, "payment: row") || strings.Count(out, ": applied") != 1 || strings.Count(out, ": duplicate") != 1 {
		t.Fatalf("choreoctl replay -order %s:\n%s\nwant the cancel applied and its copy a duplicate", o.ID, out)
	}
	t.Logf("choreoctl replay -order %s:\n%s", o.ID, out)
	wantUndone(t, f, o.ID, "customer_cancelled", balanceBefore, stockBefore)
	wantPaymentEvents(t, o.ID, map[string]int{events.TypePaymentCompleted: 1, events.TypePaymentCancelled: 1})

	// Idempotent: a second replay resolves nothing and credits nothing.
	if out := runCtl(t, ctl, "replay", "-order", o.ID); !strings.Contains(out, "already replayed") {
		t.Fatalf("second replay:\n%s\nwant: already replayed", out)
	}
	if out := runCtl(t, ctl, "parked", "-order", o.ID); strings.Contains(out, o.ID) {
		t.Fatalf("still parked after the replay:\n%s", out)
	}
	assertEqual(t, "balance after a second replay", balance(t, f.customer), balanceBefore)
	wantPaymentEvents(t, o.ID, map[string]int{events.TypePaymentCompleted: 1, events.TypePaymentCancelled: 1})
}

// setCurrency changes a payment account's currency behind the API's back,
// as a hand-made data fix would.
func setCurrency(t *testing.T, customer, currency string) {
	t.Helper()
	db, err := sqlx.Open("postgres", dbURLs["payment"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE accounts SET currency = $2 WHERE customer_id = $1`, customer, currency); err != nil {
		t.Fatal(err)
	}
}

// wantPaymentEvents checks how many events of each type payment emitted for
// the order: each effect once.
func wantPaymentEvents(t *testing.T, orderID string, want map[string]int) {
	t.Helper()
	db, err := sqlx.Open("postgres", dbURLs["payment"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var values [][]byte
	if err := db.SelectContext(context.Background(), &values, `SELECT value FROM outbox WHERE key = $1 AND topic = $2`, []byte(orderID), events.TopicPayment); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range values {
		e, err := events.DecodeEnvelope(v)
		if err != nil {
			t.Fatal(err)
		}
		got[e.Type]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("payment emitted %v for %s, want %v", got, orderID, want)
	}
}

// buildChoreoctl builds cmd/choreoctl for the test.
func buildChoreoctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(workDir, "choreoctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/choreoctl")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build choreoctl: %v\n%s", err, out)
	}
	return bin
}

// ctlErr runs choreoctl against this run's services, with their token.
func ctlErr(bin string, args ...string) (string, error) {
	var addrs []string
	for _, name := range []string{"order", "payment", "inventory", "shipping"} {
		addrs = append(addrs, name+"="+services[name].baseURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-services", strings.Join(addrs, ",")}, args...)...)
	cmd.Env = append(os.Environ(), devkey.EnvDir+"="+keyDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func runCtl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := ctlErr(bin, args...)
	if err != nil {
		t.Fatalf("choreoctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
