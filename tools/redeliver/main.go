// Command redeliver reproduces the incident this repository exists to
// prevent: it re-produces every event of one order, same event ids, onto
// the saga's topics, as a broker does after an ack is lost.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/events"
)

// Each service then logs "duplicate event skipped" for every event it had
// already applied, and no balance, stock or status changes. tools/incident
// shows what the same does to a naive check-then-act consumer.
//
//	go run ./tools/redeliver -order <order id> [-times 3]   # against make run or go run ./deploy/local
func main() {
	cli.Main("redeliver", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout) })
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("redeliver", flag.ContinueOnError)
	orderID := fs.String("order", "", "order id whose events to redeliver (required)")
	times := fs.Int("times", 1, "how many extra copies of each event to produce")
	brokersFlag := fs.String("brokers", getenv("KAFKA_BROKERS"), "Kafka brokers (default $KAFKA_BROKERS or 127.0.0.1:9092)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *orderID == "" {
		return fmt.Errorf("-order is required")
	}
	if *times < 1 {
		return fmt.Errorf("-times must be >= 1")
	}
	kafka, err := cli.Kafka(*brokersFlag, getenv)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var again []*sarama.ProducerMessage
	for _, topic := range []string{events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping} {
		msgs, err := broker.MessagesFor(ctx, kafka, topic, *orderID)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			e, _, err := events.Decode(m.Value)
			if err != nil {
				fmt.Fprintf(out, "%-17s offset %-6d undecodable, skipped: %v\n", topic, m.Offset, err)
				continue
			}
			fmt.Fprintf(out, "%-17s offset %-6d %-18s event %s  x%d\n", topic, m.Offset, e.Type, e.ID, *times)
			for range *times {
				again = append(again, broker.Redelivery(m))
			}
		}
	}
	if len(again) == 0 {
		return fmt.Errorf("no events found for order %s", *orderID)
	}
	p, err := kafka.NewSyncProducer("redeliver")
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.SendMessages(again); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fmt.Fprintf(out, "redelivered %d messages; each consumer should now log \"duplicate event skipped\" for them\n", len(again))
	return nil
}
