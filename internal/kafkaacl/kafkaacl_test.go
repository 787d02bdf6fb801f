package kafkaacl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/infra"
	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/tracker"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestGrantsCoverWhatEachServiceTouches: a service whose Spec produces or
// consumes a topic its Grant does not name would be refused by Kafka at
// start; this fails first, naming the topic.
func TestGrantsCoverWhatEachServiceTouches(t *testing.T) {
	specs := map[string]func() (participant.Spec, error){
		order.Name:     func() (participant.Spec, error) { return order.Spec(order.DefaultConfig()) },
		payment.Name:   func() (participant.Spec, error) { return payment.Spec(payment.DefaultConfig()) },
		inventory.Name: func() (participant.Spec, error) { return inventory.Spec(inventory.DefaultConfig()) },
		shipping.Name:  func() (participant.Spec, error) { return shipping.Spec(shipping.DefaultConfig()) },
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			s, err := spec()
			if err != nil {
				t.Fatal(err)
			}
			g, ok := kafkaacl.Find(s.Name)
			if !ok {
				t.Fatalf("no Grant for %s", s.Name)
			}
			want := []string{s.Produces, events.DeadLetterTopic(s.Name), outbox.HeartbeatTopic(s.Name)}
			if !slices.Equal(g.Produces, want) || g.Group != s.Name {
				t.Errorf("grant produces %v in group %s, want %v in group %s", g.Produces, g.Group, want, s.Name)
			}
			for _, topic := range s.Consumes() {
				if !slices.Contains(g.Consumes, topic) {
					t.Errorf("%s consumes %s, which its Grant does not let it read", s.Name, topic)
				}
			}
			if len(g.Consumes) != len(s.Consumes()) {
				t.Errorf("grant reads %v, the service only %v", g.Consumes, s.Consumes())
			}
		})
	}
	t.Run("connect", func(t *testing.T) {
		g, ok := kafkaacl.Find("connect")
		if !ok || !slices.Equal(g.Produces, kafkaacl.ConnectTopics) || !slices.Equal(g.Consumes, kafkaacl.ConnectTopics) {
			t.Errorf("connect grant %+v, want to read and write only %v", g, kafkaacl.ConnectTopics)
		}
	})
	t.Run(tracker.Name, func(t *testing.T) {
		g, ok := kafkaacl.Find(tracker.Name)
		if !ok || g.Group != tracker.Name || len(g.Produces) != 0 || !slices.Equal(g.Consumes, tracker.Topics) {
			t.Errorf("tracker grant %+v, want to read %v in group %s and write nothing", g, tracker.Topics, tracker.Name)
		}
	})
}

// TestServiceCredentialsAreRefusedBeyondTheirGrant tries, on the real
// broker, what a service's credentials must not allow, and what they must.
func TestServiceCredentialsAreRefusedBeyondTheirGrant(t *testing.T) {
	testenv.Topics(t, events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping, events.DeadLetterTopic("payment"))
	pay := user(t, "payment")
	// The Connect worker's user: each connector produces as its service's
	// user instead, so the worker's cannot forge any service's event.
	worker := user(t, "connect")
	tests := []struct {
		name string
		try  func() error
		want error // nil: allowed
	}{
		{"PaymentProducingToInventoryEventsIsRefused", func() error { return produceTo(pay, events.TopicInventory) }, sarama.ErrTopicAuthorizationFailed},
		{"PaymentProducingToOrderEventsIsRefused", func() error { return produceTo(pay, events.TopicOrder) }, sarama.ErrTopicAuthorizationFailed},
		{"PaymentReadingShippingEventsIsRefused", func() error { return readFrom(pay, events.TopicShipping) }, sarama.ErrTopicAuthorizationFailed},
		{"PaymentJoiningInventorysGroupIsRefused", func() error { return join(t, pay, "inventory", events.TopicOrder) }, sarama.ErrGroupAuthorizationFailed},
		{"PaymentProducesToPaymentEvents", func() error { return produceTo(pay, events.TopicPayment) }, nil},
		{"PaymentProducesToItsDeadLetterTopic", func() error { return produceTo(pay, events.DeadLetterTopic("payment")) }, nil},
		{"PaymentReadsOrderEvents", func() error { return readFrom(pay, events.TopicOrder) }, nil},
		{"PaymentJoinsItsOwnGroup", func() error { return join(t, pay, "payment", events.TopicOrder) }, nil},
		{"ConnectProducingToPaymentEventsIsRefused", func() error { return produceTo(worker, events.TopicPayment) }, sarama.ErrTopicAuthorizationFailed},
		{"ConnectProducingToPaymentsDeadLetterTopicIsRefused", func() error { return produceTo(worker, events.DeadLetterTopic("payment")) }, sarama.ErrTopicAuthorizationFailed},
		{"ConnectProducingToOrderEventsIsRefused", func() error { return produceTo(worker, events.TopicOrder) }, sarama.ErrTopicAuthorizationFailed},
		{"ConnectReadingPaymentEventsIsRefused", func() error { return readFrom(worker, events.TopicPayment) }, sarama.ErrTopicAuthorizationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.try()
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestClientsWithoutTheRightCredentialsAreRefused: no credentials at all,
// and a service's name with a wrong password, get no connection.
func TestClientsWithoutTheRightCredentialsAreRefused(t *testing.T) {
	brokers := testenv.Kafka(t).Brokers
	tests := []struct {
		name string
		conn broker.Conn
		want error // nil: any error (the broker closes a connection that skips SASL)
	}{
		{"Unauthenticated", broker.Conn{Brokers: brokers, Insecure: true}, nil},
		{"WrongPassword", broker.Conn{Brokers: brokers, Username: "payment", Password: "not-the-password"}, sarama.ErrSASLAuthenticationFailed},
		{"UnknownUser", broker.Conn{Brokers: brokers, Username: "mallory", Password: "guess"}, sarama.ErrSASLAuthenticationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.conn.Config("test-refused")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Metadata.Retry.Max = 0
			cfg.Net.DialTimeout, cfg.Net.ReadTimeout = 5*time.Second, 5*time.Second
			c, err := sarama.NewClient(brokers, cfg)
			if err == nil {
				// The connection may be opened lazily: a request must fail.
				_, err = c.Topics()
				c.Close()
			}
			if err == nil {
				t.Fatal("connected and listed topics")
			}
			// Kafka says why; the embedded broker just hangs up.
			if tt.want != nil && testenv.Infra(t).Mode != infra.ModeEmbedded && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// user is the connection of a service's own Kafka user.
func user(t *testing.T, name string) broker.Conn {
	t.Helper()
	c, ok := testenv.Infra(t).Users[name]
	if !ok {
		t.Fatalf("no Kafka user %s in the test infrastructure (scripts/infra.sh env exports %s_KAFKA_USERNAME)", name, name)
	}
	return c
}

func produceTo(conn broker.Conn, topic string) error {
	p, err := conn.NewSyncProducer("test-acl")
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("acl-test"), Value: sarama.StringEncoder("{}")})
	return err
}

func readFrom(conn broker.Conn, topic string) error {
	c, err := conn.NewClient("test-acl")
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.GetOffset(topic, 0, sarama.OffsetNewest); err != nil {
		return err
	}
	consumer, err := sarama.NewConsumerFromClient(c)
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	return pc.Close()
}

// join joins group on topic and returns once it has a claim, or the error
// that kept it out.
func join(t *testing.T, conn broker.Conn, group, topic string) error {
	cfg, err := conn.Config("test-acl")
	if err != nil {
		return err
	}
	cfg.Consumer.Group.Rebalance.Retry.Max = 0 // a refusal is final
	cg, err := sarama.NewConsumerGroup(conn.Brokers, group, cfg)
	if err != nil {
		return err
	}
	defer cg.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	joined := joinedHandler{cancel: cancel}
	err = cg.Consume(ctx, []string{topic}, joined)
	if err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	return err
}

// joinedHandler ends the session as soon as it is set up.
type joinedHandler struct{ cancel context.CancelFunc }

func (h joinedHandler) Setup(sarama.ConsumerGroupSession) error   { h.cancel(); return nil }
func (h joinedHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h joinedHandler) ConsumeClaim(s sarama.ConsumerGroupSession, _ sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

// TestScriptsCreateEveryUser: the shell that formats the brokers' storage
// (scripts/infra.sh, deploy/compose/kafka/start.sh) names the
// administrator and every Grant's user, so no service starts without one.
func TestScriptsCreateEveryUser(t *testing.T) {
	want := append([]string{"admin"}, kafkaacl.Users()...)
	tests := []struct{ file, list string }{
		{"../../scripts/infra.sh", `KAFKA_USERS=\(([^)]*)\)`},
		{"../../deploy/compose/kafka/start.sh", `for u in ([^;]*); do\s+scram\+=`},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			b, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(tt.list).FindSubmatch(b)
			if m == nil {
				t.Fatalf("%s: no user list matching %s", tt.file, tt.list)
			}
			if got := strings.Fields(string(m[1])); !slices.Equal(got, want) {
				t.Errorf("%s creates users %v, want %v", tt.file, got, want)
			}
		})
	}
}

// TestApplyRemovesStaleACLs: a permission dropped from Grants leaves the
// cluster at the next Apply. Here payment was once allowed to write
// inventory.events; after Apply it is refused again, and keeps its own.
func TestApplyRemovesStaleACLs(t *testing.T) {
	testenv.Topics(t, events.TopicInventory, events.TopicPayment)
	admin, err := testenv.Kafka(t).NewClusterAdmin("test-acl-admin")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	stale := &sarama.ResourceAcls{
		Resource: sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: events.TopicInventory, ResourcePatternType: sarama.AclPatternLiteral},
		Acls:     []*sarama.Acl{{Principal: kafkaacl.Principal("payment"), Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow}},
	}
	if err := admin.CreateACLs([]*sarama.ResourceAcls{stale}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kafkaacl.Apply(admin) }) // never leave the grant behind
	pay := user(t, "payment")
	testenv.Eventually(t, 30*time.Second, "the stale grant in force", func() bool { return produceTo(pay, events.TopicInventory) == nil })

	if err := kafkaacl.Apply(admin); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "payment refused on inventory.events again", func() bool {
		return errors.Is(produceTo(pay, events.TopicInventory), sarama.ErrTopicAuthorizationFailed)
	})
	if err := produceTo(pay, events.TopicPayment); err != nil {
		t.Errorf("payment refused on its own topic after Apply: %v", err)
	}
}

// TestHeartbeatTopicsExist: every service's Debezium heartbeat topic is
// there once kafka-acls ran (the brokers create none on a write, and a
// connector whose heartbeat cannot be sent fails), kept an hour; a second
// run finds them and changes nothing.
func TestHeartbeatTopicsExist(t *testing.T) {
	admin := testenv.Admin(t)
	for range 2 {
		if err := kafkaacl.CreateHeartbeatTopics(admin); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, g := range kafkaacl.Grants {
		if g.User != "tracker" && g.User != "connect" {
			want = append(want, outbox.HeartbeatTopic(g.User))
		}
	}
	if len(want) != 4 {
		t.Fatalf("heartbeat topics of %d services, want the four that emit", len(want))
	}
	for _, topic := range want {
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
		if err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		if len(entries) != 1 || entries[0].Value != "3600000" {
			t.Errorf("%s: retention.ms %v, want 3600000", topic, entries)
		}
	}
}
