package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/inventory"
	orderservice "github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
)

// produce writes raw messages to Kafka, bypassing the services' outboxes:
// the suite's way of redelivering events and injecting poison.
func produce(t *testing.T, msgs ...*sarama.ProducerMessage) {
	t.Helper()
	// The services created these topics; on a broker started a moment
	// ago their leaders may still be taking over (testenv.WaitTopics).
	topics := map[string]bool{}
	var names []string
	for _, m := range msgs {
		if !topics[m.Topic] {
			topics[m.Topic] = true
			names = append(names, m.Topic)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testenv.WaitTopics(ctx, running.Kafka, names...); err != nil {
		t.Fatal(err)
	}
	p, err := running.Kafka.NewSyncProducer("e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// produceEvent wraps a payload in a fresh envelope and writes it to topic.
func produceEvent(t *testing.T, topic, orderID string, p events.Payload) events.Envelope {
	t.Helper()
	e, err := events.New("e2e", orderID, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	produce(t, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(orderID), Value: sarama.ByteEncoder(v),
		Headers: []sarama.RecordHeader{
			{Key: []byte(events.HeaderEventID), Value: []byte(e.ID)},
			{Key: []byte(events.HeaderEventType), Value: []byte(e.Type)},
		}})
	return e
}

// messagesFor returns every message on topic keyed key.
func messagesFor(t *testing.T, topic, key string) []*sarama.ConsumerMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := broker.MessagesFor(ctx, running.Kafka, topic, key)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// eventuallyMessages waits until topic holds at least want messages keyed key.
func eventuallyMessages(t *testing.T, topic, key string, want int) []*sarama.ConsumerMessage {
	t.Helper()
	var got []*sarama.ConsumerMessage
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d messages keyed %s on %s", want, key, topic), func() bool {
		got = messagesFor(t, topic, key)
		return len(got) >= want
	})
	return got
}

// header is testenv.Header, under the short name the e2e tests read it by.
func header(m *sarama.ConsumerMessage, key string) string { return testenv.Header(m, key) }

// atRest waits until every service's outbox is empty and every service's
// consumer group has committed the end of the topics it consumes
// (testenv.AtRest): the moment to check that something happened exactly
// once, since a duplicate on its way would have arrived by then.
func atRest(t *testing.T) {
	t.Helper()
	rest := testenv.Rest{Kafka: running.Kafka, Groups: map[string][]string{}}
	specs := map[string]func() (participant.Spec, error){
		"order":     func() (participant.Spec, error) { return orderservice.Spec(orderservice.DefaultConfig()) },
		"payment":   func() (participant.Spec, error) { return payment.Spec(payment.DefaultConfig()) },
		"inventory": func() (participant.Spec, error) { return inventory.Spec(inventory.DefaultConfig()) },
		"shipping":  func() (participant.Spec, error) { return shipping.Spec(shipping.DefaultConfig()) },
	}
	for name, spec := range specs {
		s, err := spec()
		if err != nil {
			t.Fatal(err)
		}
		rest.Groups[s.Name] = s.Consumes()
		db, err := sqlx.Open("postgres", dbURLs[name])
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rest.Outboxes = append(rest.Outboxes, db)
	}
	testenv.AtRest(t, 60*time.Second, rest)
}
