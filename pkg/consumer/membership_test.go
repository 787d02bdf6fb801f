package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/consumer"
)

func TestInstanceIDIsStablePerHostAndPort(t *testing.T) {
	tests := []struct {
		name, group, host, addr, want string
	}{
		{"service, host and port", "payment", "pod-7", ":8081", "payment-pod-7-8081"},
		{"a bound interface keeps only the port", "order", "web1", "127.0.0.1:8080", "order-web1-8080"},
		{"characters Kafka refuses become dashes", "tracker", "host name:x", ":8084", "tracker-host-name-x-8084"},
		{"an ephemeral port is dynamic membership", "payment", "pod-7", ":0", ""},
		{"no port is dynamic membership", "payment", "pod-7", "localhost", ""},
		{"no host name is dynamic membership", "payment", "", ":8081", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := consumer.InstanceID(tt.group, tt.host, tt.addr); got != tt.want {
				t.Errorf("InstanceID(%q, %q, %q) = %q, want %q", tt.group, tt.host, tt.addr, got, tt.want)
			}
		})
	}
}

// member starts a static member of group on topic that accepts every
// message, with a session timeout long enough that a member waiting for
// it to expire cannot be mistaken for one handed its partitions at once.
func member(t *testing.T, group, topic, instance string) (*consumer.Group, func()) {
	t.Helper()
	g, err := consumer.New(consumer.Config{
		Kafka: testenv.Kafka(t), GroupID: group, Topics: []string{topic}, InstanceID: instance,
		Handler:    consumer.HandlerFunc(func(context.Context, *sarama.ConsumerMessage) error { return nil }),
		DeadLetter: func(context.Context, *sarama.ConsumerMessage, error) error { return nil },
		Logger:     testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	consumer.SessionTimeout(g, 30*time.Second)
	return g, testenv.Background(t, "the consumer group "+instance, time.Minute, g.Run)
}

func holds(g *consumer.Group, n int) func() bool {
	return func() bool { _, got := g.Assigned(); return got == n }
}

// TestCrashedStaticMemberRestartKeepsItsPartitions: a static member killed
// and started again under its id is handed its partitions back by the
// coordinator without a rebalance (the generation stays).
func TestCrashedStaticMemberRestartKeepsItsPartitions(t *testing.T) {
	topic := testenv.Topic(t, "static")
	group, instance := testenv.ID("static"), testenv.ID("i")

	first, stop := member(t, group, topic, instance)
	testenv.Eventually(t, 60*time.Second, "the first member holds every partition", holds(first, broker.Partitions))
	gen, _ := first.Assigned()
	consumer.Crash(first)
	stop()

	again, stop := member(t, group, topic, instance)
	defer stop()
	testenv.Eventually(t, 60*time.Second, "the restarted member holds every partition", holds(again, broker.Partitions))
	if got, _ := again.Assigned(); got != gen {
		t.Fatalf("generation %d after the restart, want %d: the group rebalanced", got, gen)
	}
}

// TestDeliberateStopHandsPartitionsOverAtOnce: a static member does not
// leave its group when it closes (KIP-345), so a stopped one would hold
// its partitions for its whole session (30s here). Run removes it on
// a deliberate stop, so the other member gets every partition well within
// that; a crashed member, which cannot, is shown for contrast.
func TestDeliberateStopHandsPartitionsOverAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		crash bool
	}{{"stopped", false}, {"crashed", true}} {
		t.Run(tt.name, func(t *testing.T) {
			topic := testenv.Topic(t, "handover")
			group := testenv.ID("handover")
			a, stopA := member(t, group, topic, testenv.ID("a"))
			b, stopB := member(t, group, topic, testenv.ID("b"))
			defer stopB()
			testenv.Eventually(t, 60*time.Second, "both members hold partitions", func() bool {
				_, na := a.Assigned()
				_, nb := b.Assigned()
				return na > 0 && nb > 0 && na+nb == broker.Partitions
			})
			if tt.crash {
				consumer.Crash(a)
			}
			stopA()
			// 15s is half the session timeout: only a removed member's
			// partitions can move within it.
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) && !holds(b, broker.Partitions)() {
				time.Sleep(100 * time.Millisecond)
			}
			switch got := holds(b, broker.Partitions)(); {
			case !tt.crash && !got:
				t.Fatal("the remaining member did not get every partition within 15s of the other's stop: the stopped member was not removed")
			case tt.crash && got:
				t.Fatal("a crashed member's partitions moved before its session ended: this test cannot tell a removal from a crash")
			}
		})
	}
}

// TestStoppingAFencedMemberLeavesTheOtherAlone: two live processes under
// one instance id (a copy started by mistake, a hard-coded id): the second
// takes the id and fences the first. When the first then stops on purpose,
// its removal names its own member id, so the coordinator refuses it and
// the member that holds the id keeps its partitions, with no rebalance.
func TestStoppingAFencedMemberLeavesTheOtherAlone(t *testing.T) {
	topic := testenv.Topic(t, "fence")
	group, id := testenv.ID("fence"), testenv.ID("same")
	a, stopA := member(t, group, topic, id)
	testenv.Eventually(t, 60*time.Second, "the first member holds every partition", holds(a, broker.Partitions))
	b, stopB := member(t, group, topic, id)
	defer stopB()
	testenv.Eventually(t, 60*time.Second, "the second member, under the same id, holds every partition", holds(b, broker.Partitions))
	gen, _ := b.Assigned()
	testenv.Eventually(t, 60*time.Second, "the first member says it is not in a session", func() bool { return a.Ready(context.Background()) != nil })
	stopA()
	// A removal that hit the second member would start a rebalance it
	// notices within a heartbeat (1s); give it several.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if g, n := b.Assigned(); g != gen || n != broker.Partitions {
			t.Fatalf("after the fenced member's stop the other is at generation %d with %d partitions, want %d with %d: the stop removed it", g, n, gen, broker.Partitions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
