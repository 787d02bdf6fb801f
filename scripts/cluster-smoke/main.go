// Command cluster-smoke is the Go half of scripts/infra-cluster-smoke.sh:
// it creates topics on a multi-node cluster, waits for leadership to leave
// a killed node, and produces with the services' producer settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/pkg/broker"
)

// Usage:
//
//	cluster-smoke -brokers B create -topic T -rf 3 -min-isr 2
//	cluster-smoke -brokers B await-failover -topic T -dead 2
//	cluster-smoke -brokers B produce -topic T -n 20 [-want-error NOT_ENOUGH_REPLICAS]
func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-smoke:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	global := flag.NewFlagSet("cluster-smoke", flag.ExitOnError)
	brokersFlag := global.String("brokers", os.Getenv("KAFKA_BROKERS"), "bootstrap brokers, comma-separated")
	_ = global.Parse(args)
	kafka, err := cli.Kafka(*brokersFlag, os.Getenv)
	if err != nil {
		return err
	}
	if global.NArg() == 0 {
		return errors.New("want a command: create, await-failover or produce")
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	topic := fs.String("topic", "", "topic")
	rf := fs.Int("rf", 3, "replication factor (create)")
	minISR := fs.Int("min-isr", 2, "min.insync.replicas (create)")
	dead := fs.Int("dead", 0, "id of the killed broker (await-failover)")
	n := fs.Int("n", 20, "messages to produce (produce)")
	wantErr := fs.String("want-error", "", "produce must fail with this Kafka error, e.g. NOT_ENOUGH_REPLICAS")
	_ = fs.Parse(rest)
	if *topic == "" {
		return errors.New("-topic is required")
	}
	switch cmd {
	case "create":
		return create(kafka, *topic, *rf, *minISR)
	case "await-failover":
		return awaitFailover(kafka, *topic, int32(*dead))
	case "produce":
		return produce(kafka, *topic, *n, *wantErr)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func create(kafka broker.Conn, topic string, rf, minISR int) error {
	s := broker.TopicSettings{Partitions: broker.Partitions, ReplicationFactor: int16(rf), MinInsyncReplicas: int16(minISR)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := broker.EnsureTopicsWith(ctx, kafka, "cluster-smoke", s, topic); err != nil {
		return err
	}
	// A new topic's leaders are elected a moment after it is created.
	if err := broker.WaitServed(ctx, kafka, topic); err != nil {
		return err
	}
	fmt.Printf("created %s with %+v, served in %v\n", topic, s, time.Since(start).Round(time.Millisecond))
	return describe(kafka, topic)
}

// describe prints each partition's leader, replicas and ISR, and the topic's
// min.insync.replicas with where it comes from.
func describe(kafka broker.Conn, topic string) error {
	admin, err := kafka.NewClusterAdmin("cluster-smoke")
	if err != nil {
		return err
	}
	defer admin.Close()
	md, err := admin.DescribeTopics([]string{topic})
	if err != nil {
		return err
	}
	if len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) {
		return fmt.Errorf("describe %s: %+v", topic, md)
	}
	parts := md[0].Partitions
	slices.SortFunc(parts, func(a, b *sarama.PartitionMetadata) int { return int(a.ID - b.ID) })
	for _, p := range parts {
		fmt.Printf("  %s/%d leader=%d replicas=%v isr=%v\n", topic, p.ID, p.Leader, p.Replicas, p.Isr)
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"},
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		fmt.Printf("  %s %s=%s (source %v)\n", topic, e.Name, e.Value, e.Source)
	}
	return nil
}

// awaitFailover polls metadata until no partition of topic is led by dead
// and dead has left every ISR, and prints how long that took.
func awaitFailover(kafka broker.Conn, topic string, dead int32) error {
	start := time.Now()
	cfg, err := kafka.Config("cluster-smoke")
	if err != nil {
		return err
	}
	cfg.Metadata.Retry.Max = 0
	for time.Since(start) < 2*time.Minute {
		if done, err := failedOver(kafka, cfg, topic, dead); err == nil && done {
			fmt.Printf("leadership and ISR left broker %d after %v\n", dead, time.Since(start).Round(100*time.Millisecond))
			return describe(kafka, topic)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("broker %d still leads or is in an ISR of %s after 2m", dead, topic)
}

func failedOver(kafka broker.Conn, cfg *sarama.Config, topic string, dead int32) (bool, error) {
	c, err := sarama.NewClient(kafka.Brokers, cfg)
	if err != nil {
		return false, err
	}
	defer c.Close()
	admin, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		return false, err
	}
	md, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(md) != 1 {
		return false, err
	}
	for _, p := range md[0].Partitions {
		if p.Leader == dead || p.Leader < 0 || slices.Contains(p.Isr, dead) {
			return false, nil
		}
	}
	return true, nil
}

// wantErrors are the Kafka errors -want-error understands.
var wantErrors = map[string]error{
	"NOT_ENOUGH_REPLICAS":              sarama.ErrNotEnoughReplicas,
	"NOT_ENOUGH_REPLICAS_AFTER_APPEND": sarama.ErrNotEnoughReplicasAfterAppend,
}

// produce sends n keyed messages with the services' producer (acks=all).
// With wantErr, the first send must fail with that Kafka error instead.
func produce(kafka broker.Conn, topic string, n int, wantErr string) error {
	var want error
	if wantErr != "" {
		if want = wantErrors[wantErr]; want == nil {
			return fmt.Errorf("-want-error %q: know only NOT_ENOUGH_REPLICAS(_AFTER_APPEND)", wantErr)
		}
	}
	p, err := kafka.NewSyncProducer("cluster-smoke")
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	perPartition := map[int32]int{}
	for i := range n {
		partition, _, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("order-%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("smoke %d at %s", i, time.Now().Format(time.RFC3339Nano))),
		})
		if want != nil {
			if !errors.Is(err, want) {
				return fmt.Errorf("produce to %s: got %v, want %v", topic, err, want)
			}
			fmt.Printf("produce with acks=all to %s refused as expected after %v: %v\n", topic, time.Since(start).Round(time.Millisecond), err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("produce %d to %s: %w", i, topic, err)
		}
		perPartition[partition]++
	}
	fmt.Printf("produced %d messages with acks=all to %s in %v (per partition %v)\n", n, topic, time.Since(start).Round(time.Millisecond), perPartition)
	return nil
}
