package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// TestMessagesForReportsAConsumerThatGivesUp: a partition consumer closes
// its Messages channel when it stops for good — here because the broker
// answers the fetch with OFFSET_OUT_OF_RANGE, as it does when retention
// deletes the log under a reader. MessagesFor must return the consumer's
// error, not read a nil message from the closed channel.
func TestMessagesForReportsAConsumerThatGivesUp(t *testing.T) {
	const topic = "orders"
	mb := sarama.NewMockBroker(t, 1)
	defer mb.Close()
	fetch := &sarama.FetchResponse{Version: 12}
	fetch.AddError(topic, 0, sarama.ErrOffsetOutOfRange)
	mb.SetHandlerByMap(map[string]sarama.MockResponse{
		"ApiVersionsRequest": sarama.NewMockApiVersionsResponse(t).SetApiKeys([]sarama.ApiVersionsResponseKey{
			{ApiKey: 1, MinVersion: 0, MaxVersion: 12}, // Fetch
			{ApiKey: 2, MinVersion: 0, MaxVersion: 8},  // ListOffsets
			{ApiKey: 3, MinVersion: 0, MaxVersion: 12}, // Metadata
			{ApiKey: 18, MinVersion: 0, MaxVersion: 3}, // ApiVersions
		}),
		"MetadataRequest": sarama.NewMockMetadataResponse(t).
			SetBroker(mb.Addr(), mb.BrokerID()).
			SetLeader(topic, 0, mb.BrokerID()),
		"OffsetRequest": sarama.NewMockOffsetResponse(t).
			SetOffset(topic, 0, sarama.OffsetOldest, 0).
			SetOffset(topic, 0, sarama.OffsetNewest, 5),
		"FetchRequest": sarama.NewMockWrapper(fetch),
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- errors.New("MessagesFor panicked")
				t.Errorf("MessagesFor panicked: %v", v)
			}
		}()
		_, err := broker.MessagesFor(ctx, broker.Conn{Brokers: []string{mb.Addr()}, Insecure: true}, topic, "order-1")
		done <- err
	}()
	err := <-done
	if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		t.Fatalf("MessagesFor = %v, want an error wrapping %v", err, sarama.ErrOffsetOutOfRange)
	}
}
