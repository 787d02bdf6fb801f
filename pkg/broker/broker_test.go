package broker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
)

func TestValidateAddrs(t *testing.T) {
	tests := []struct {
		name  string
		addrs []string
		ok    bool
	}{
		{"One", []string{"127.0.0.1:9092"}, true},
		{"Several", []string{"kafka-1:9092", "kafka-2:9092"}, true},
		// Addrs.Decode trims; a list that bypassed it must not pass with a
		// space the client would try to resolve.
		{"UntrimmedEntry", []string{"kafka-1:9092", " kafka-2:9092"}, false},
		{"None", nil, false},
		{"NoPort", []string{"localhost"}, false},
		{"EmptyEntry", []string{"localhost:9092", ""}, false},
		{"NoHost", []string{":9092"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := broker.ValidateAddrs(tt.addrs); (err == nil) != tt.ok {
				t.Fatalf("ValidateAddrs(%q) = %v, want ok=%v", tt.addrs, err, tt.ok)
			}
		})
	}
}

func TestAddrsDecodeTrimsEntries(t *testing.T) {
	tests := []struct {
		value   string
		want    []string
		wantErr bool
	}{
		{"a:9092, b:9092", []string{"a:9092", "b:9092"}, false},
		{" a:9092 ,b:9092 ", []string{"a:9092", "b:9092"}, false},
		{"", nil, false}, // "required" is envconfig's to enforce
		{"a:9092,,b:9092", nil, true},
		{"a:9092, ", nil, true},
	}
	for _, tt := range tests {
		var got broker.Addrs
		err := got.Decode(tt.value)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !slices.Equal(got, tt.want)) {
			t.Errorf("Decode(%q) = %q, %v; want %q, error %v", tt.value, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestConfigKeepsTheGuarantees pins the client settings the saga's
// guarantees depend on, so a well-meant "tuning" change fails here first.
func TestConfigKeepsTheGuarantees(t *testing.T) {
	c, err := broker.Conn{Brokers: []string{"127.0.0.1:9092"}, Username: "svc", Password: "pw"}.Config("test")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"acks from all in-sync replicas", c.Producer.RequiredAcks == sarama.WaitForAll},
		{"idempotent producer", c.Producer.Idempotent},
		{"one request in flight, so retries cannot reorder", c.Net.MaxOpenRequests == 1},
		{"new groups start at the oldest offset", c.Consumer.Offsets.Initial == sarama.OffsetOldest},
		{"authenticated with SCRAM-SHA-512", c.Net.SASL.Enable && c.Net.SASL.Mechanism == sarama.SASLTypeSCRAMSHA512},
		{"config valid for sarama", c.Validate() == nil},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("broker.Config: want %s", ch.what)
		}
	}
}

// TestProbeReusesItsAnswer: within its ttl a Probe answers from memory, so
// it does not notice a change (here: the broker address is closed from the
// start, so the first answer is an error) until the ttl ends.
func TestProbeReusesItsAnswer(t *testing.T) {
	p := broker.NewProbe(broker.Conn{Brokers: []string{"127.0.0.1:1"}, Insecure: true}, time.Hour)
	first := p.Check(context.Background())
	if first == nil {
		t.Fatal("want an error from a closed port")
	}
	// The very same error value: remembered, not a second Ping.
	if err := p.Check(context.Background()); err != first {
		t.Fatalf("second Check = %v, want the remembered %v", err, first)
	}
}
