package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/pg"
)

// env is one contender's database and the Kafka cluster.
type env struct {
	db     *sqlx.DB
	url    string
	kafka  broker.Conn
	client sarama.Client
	// topics are the drain's and the trickle's, named before Prepare (the
	// Debezium contender's trigger refuses rows for any other topic) and
	// created as each phase starts.
	topics []string
}

// newEnv (re)creates database name next to baseURL's, connects to it and
// to Kafka, and names contender's topics.
func newEnv(ctx context.Context, baseURL, name, contender string, kafka broker.Conn) (*env, error) {
	admin, err := sqlx.ConnectContext(ctx, "postgres", baseURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for _, q := range []string{`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`, `CREATE DATABASE ` + name} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	db, err := pg.Open(ctx, u.String(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	client, err := kafka.NewClient("outbox-bench")
	if err != nil {
		db.Close()
		return nil, err
	}
	id := uuid.NewString()[:8]
	topics := []string{"bench-" + contender + "-drain-" + id, "bench-" + contender + "-trickle-" + id}
	return &env{db: db, url: u.String(), kafka: kafka, client: client, topics: topics}, nil
}

func (e *env) Close() {
	e.client.Close()
	e.db.Close()
}

// topic creates topic t, fresh, with 3 partitions.
func (e *env) topic(ctx context.Context, t string) (string, error) {
	s := broker.DefaultTopicSettings()
	s.Partitions = 3
	if err := broker.EnsureTopicsWith(ctx, e.kafka, "outbox-bench", s, t); err != nil {
		return "", err
	}
	// A new topic's partitions need a moment to get leaders; until they
	// have, producers and consumers are refused.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := e.client.RefreshMetadata(t)
		if err == nil {
			_, err = e.published(t)
		}
		if err == nil {
			return t, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("topic %s: %w", t, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// published is the number of records in topic: the sum of its
// partitions' newest offsets (fresh topics start at 0).
func (e *env) published(topic string) (int64, error) {
	parts, err := e.client.Partitions(topic)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range parts {
		off, err := e.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, err
		}
		n += off
	}
	return n, nil
}

// waitFor returns once topic holds n records, or the contender failed.
func (e *env) waitFor(ctx context.Context, topic string, n int64, errc <-chan error) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		got, err := e.published(topic)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case err := <-errc:
			return fmt.Errorf("contender stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("not drained in 10 minutes")
}

// trickle commits one row every 1/rate seconds for d with insert(i) and
// returns, for each row that reached Kafka, the time from its commit to
// its arrival at a consumer. The value of row i is "i".
func (e *env) trickle(ctx context.Context, topic string, rate float64, d time.Duration, insert func(i int) error, errc <-chan error) ([]time.Duration, error) {
	consumer, err := sarama.NewConsumerFromClient(e.client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	parts, err := e.client.Partitions(topic)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	committed, arrivals := map[int]time.Time{}, map[int]time.Time{}
	arrived := 0
	var wg sync.WaitGroup
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case <-cctx.Done():
					return
				case m := <-pc.Messages():
					now := time.Now()
					i, err := strconv.Atoi(string(m.Value))
					mu.Lock()
					if _, dup := arrivals[i]; err == nil && !dup {
						arrivals[i] = now
						arrived++
					}
					mu.Unlock()
				}
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		if err := insert(i); err != nil {
			return nil, err
		}
		mu.Lock()
		committed[i] = time.Now()
		mu.Unlock()
	}
	// Wait for the stragglers (the naive poller's second, Watermill's poll).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		mu.Lock()
		done := arrived >= n
		mu.Unlock()
		if done {
			break
		}
		select {
		case err := <-errc:
			return nil, fmt.Errorf("contender stopped: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if arrived < n {
		return nil, fmt.Errorf("%d of %d rows reached Kafka", arrived, n)
	}
	// A row can arrive before its commit time is taken (commit returned,
	// the relay was faster than this goroutine): that counts as 0.
	lat := make([]time.Duration, 0, n)
	for i, t := range committed {
		lat = append(lat, max(0, arrivals[i].Sub(t)))
	}
	return lat, nil
}
