package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/IBM/sarama"
	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the outboxes are read straight from the services' databases

	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// Rest is what the wait for the system at rest found: every outbox sent
// and every consumer group's committed offsets at the partitions' ends.
type Rest struct {
	Reached bool             `json:"reached"`
	Waited  Duration         `json:"waited"`
	Outbox  map[string]int   `json:"outbox_unsent"` // rows not sent (parked ones too), by service
	Lag     map[string]int64 `json:"lag"`           // messages not committed, by consumer group
	Err     string           `json:"error,omitempty"`
}

// WaitAtRest waits, up to limit, until no service's outbox holds a row not
// sent and every service's consumer group has committed every partition
// it reads up to its end: nothing is on its way anywhere, so a read now
// sees every effect there will be. It reports what it last saw.
func WaitAtRest(ctx context.Context, conn broker.Conn, databases map[string]string, limit time.Duration) Rest {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var r Rest
	done := func(err error) Rest {
		r.Waited = Duration(time.Since(t0))
		if err != nil {
			r.Err = err.Error()
		}
		return r
	}
	dbs := map[string]*sqlx.DB{}
	for _, s := range Services {
		db, err := sqlx.Open("postgres", databases[s])
		if err != nil {
			return done(fmt.Errorf("open %s's database: %w", s, err))
		}
		defer db.Close()
		dbs[s] = db
	}
	client, err := conn.NewClient("chaos-rest")
	if err != nil {
		return done(fmt.Errorf("kafka: connect: %w", err))
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return done(fmt.Errorf("kafka: admin: %w", err))
	}
	// admin.Close would close the client too: the deferred client.Close does.
	marks := map[string]*outbox.SweepMark{}
	for {
		var errs []error
		r.Outbox, r.Lag = map[string]int{}, map[string]int64{}
		for _, s := range Services {
			if marks[s] == nil {
				marks[s] = &outbox.SweepMark{}
			}
			n, err := unsent(ctx, dbs[s], s, marks[s])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s's outbox: %w", s, err))
			}
			r.Outbox[s] = n
			lag, err := groupLag(client, admin, s, Consumes(s))
			if err != nil {
				errs = append(errs, fmt.Errorf("group %s: %w", s, err))
			}
			r.Lag[s] = lag
		}
		err := errors.Join(errs...)
		if err == nil && sum(r.Outbox) == 0 && sum(r.Lag) == 0 {
			r.Reached = true
			return done(nil)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("not at rest after %s", limit)
			}
			return done(err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unsent counts the outbox rows not sent, refused ones included: a refused
// row is a message that never left. Under Debezium
// (outbox.DebeziumPublishes) a published row stays until the service
// sweeps it: there it is the rows the slot has not confirmed
// (outbox.Unconfirmed).
func unsent(ctx context.Context, db *sqlx.DB, service string, mark *outbox.SweepMark) (int, error) {
	debezium, err := outbox.DebeziumPublishes(ctx, db)
	if err != nil {
		return 0, err
	}
	var n int
	if debezium {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND refused_at IS NOT NULL`).Scan(&n); err != nil {
			return 0, err
		}
		unconfirmed, err := outbox.Unconfirmed(ctx, db, outbox.Slot(service), mark)
		return n + unconfirmed, err
	}
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`).Scan(&n)
	return n, err
}

// groupLag sums, over every partition of topics, how far group's
// committed offset is behind the partition's end (its high-water mark).
// A partition the group never committed lags by all it holds.
func groupLag(client sarama.Client, admin sarama.ClusterAdmin, group string, topics []string) (int64, error) {
	if err := client.RefreshMetadata(topics...); err != nil {
		return 0, err
	}
	parts := map[string][]int32{}
	for _, t := range topics {
		ps, err := client.Partitions(t)
		if err != nil {
			return 0, err
		}
		parts[t] = ps
	}
	committed, err := admin.ListConsumerGroupOffsets(group, parts)
	if err != nil {
		return 0, err
	}
	if committed.Err != sarama.ErrNoError {
		return 0, committed.Err
	}
	var lag int64
	for t, ps := range parts {
		for _, p := range ps {
			end, err := client.GetOffset(t, p, sarama.OffsetNewest)
			if err != nil {
				return 0, err
			}
			from := int64(-1)
			if b := committed.GetBlock(t, p); b != nil {
				if b.Err != sarama.ErrNoError {
					return 0, fmt.Errorf("%s/%d: %w", t, p, b.Err)
				}
				from = b.Offset
			}
			if from < 0 {
				if from, err = client.GetOffset(t, p, sarama.OffsetOldest); err != nil {
					return 0, err
				}
			}
			lag += max(0, end-from)
		}
	}
	return lag, nil
}

func sum[V int | int64](m map[string]V) V {
	var n V
	for v := range maps.Values(m) {
		n += v
	}
	return n
}
