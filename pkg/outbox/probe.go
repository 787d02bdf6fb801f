// This file holds per-key progress. A row that fails for a reason that may
// pass blocks its key (topic and message key): later rounds read the rows
// of every other key, and the oldest row of each blocked key is probed on a
// backoff, so one unavailable partition stops only its own keys.
// TestUnavailablePartitionDoesNotBlockOthers shows why.

package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// blockKey is what a row that failed blocks: the later rows of its topic
// and key, which must not overtake it. An unkeyed row has no order to keep,
// and blocks only itself.
type blockKey struct {
	topic string
	key   string
	id    int64 // unkeyed rows only
}

func (rw row) blockKey() blockKey {
	if rw.Key == nil {
		return blockKey{topic: rw.Topic, id: rw.ID}
	}
	return blockKey{topic: rw.Topic, key: string(rw.Key)}
}

// blocked is the keys a relay has blocked, and when it probes them.
type blocked struct {
	keys  map[blockKey]struct{}
	at    time.Time     // when the blocked keys' oldest rows are retried
	delay time.Duration // the current wait between retries
}

// reset forgets every blocked key, as a relay that stops leading does.
func (b *blocked) reset() {
	clear(b.keys)
	b.delay = probeFirst
}

const (
	// probeFirst is how soon the oldest row of a newly blocked key is
	// retried; the wait doubles, up to probeMax, while retries fail.
	probeFirst = 250 * time.Millisecond
	probeMax   = 5 * time.Second
)

// maxBlocked caps the blocked keys. Past it (most of the backlog failing,
// as when the whole cluster is down) a failing row blocks nothing more, and
// Run backs off instead.
func (r *Relay) maxBlocked() int { return 16 * r.cfg.BatchSize }

// selectUnblocked is selectPublishable without the rows of blocked keys.
var selectUnblocked = byteCapped(`
		SELECT id, txid, topic, key, value, headers
		FROM outbox
		WHERE sent_at IS NULL AND refused_at IS NULL
		  AND txid < pg_snapshot_xmin(pg_current_snapshot())
		  AND NOT (key IS NOT NULL AND (topic, key) IN (SELECT * FROM unnest($2::text[], $3::bytea[])))
		  AND id <> ALL($4::bigint[])
		ORDER BY txid, id
		LIMIT $1`)

// selectHeads reads the oldest publishable row of each blocked key.
const selectHeads = `
		SELECT id, topic, key, value, headers FROM (
			SELECT DISTINCT ON (topic, key, CASE WHEN key IS NULL THEN id END)
			       id, txid, topic, key, value, headers
			FROM outbox
			WHERE sent_at IS NULL AND refused_at IS NULL
			  AND txid < pg_snapshot_xmin(pg_current_snapshot())
			  AND ((key IS NOT NULL AND (topic, key) IN (SELECT * FROM unnest($2::text[], $3::bytea[])))
			       OR id = ANY($4::bigint[]))
			ORDER BY topic, key, CASE WHEN key IS NULL THEN id END, txid, id
		) heads
		ORDER BY txid, id
		LIMIT $1`

// blockedArgs returns the blocked keys as the query arguments $2 to $4.
func (r *Relay) blockedArgs() []any {
	// Empty, not nil: a nil slice is NULL, and id <> ALL(NULL) is never true.
	topics, keys, ids := []string{}, [][]byte{}, []int64{}
	for k := range r.blocked.keys {
		if k.id != 0 {
			ids = append(ids, k.id)
			continue
		}
		topics = append(topics, k.topic)
		keys = append(keys, []byte(k.key))
	}
	return []any{pq.Array(topics), pq.Array(keys), pq.Array(ids)}
}

// publishable returns the round's query for up to limit rows:
// selectPublishable, less the rows of blocked keys.
func (r *Relay) publishable(limit int) (string, []any) {
	if len(r.blocked.keys) == 0 {
		return selectPublishable, []any{limit}
	}
	return selectUnblocked, append([]any{limit}, r.blockedArgs()...)
}

// probeHeads reads, when their retry is due, the oldest row of each blocked
// key: at most half a batch, published beside the round's other rows.
func (r *Relay) probeHeads(ctx context.Context, conn *sqlx.Conn) ([]row, error) {
	if len(r.blocked.keys) == 0 || r.cfg.Clock.Now().Before(r.blocked.at) {
		return nil, nil
	}
	n := max(1, r.cfg.BatchSize/2)
	var heads []row
	if err := conn.SelectContext(ctx, &heads, selectHeads, append([]any{n}, r.blockedArgs()...)...); err != nil {
		return nil, fmt.Errorf("outbox: select rows of blocked keys: %w", err)
	}
	if len(heads) < n {
		// Every blocked key answered: those that did not have no
		// publishable row left (another leader sent it, or it was refused)
		// and block nothing.
		has := make(map[blockKey]bool, len(heads))
		for _, h := range heads {
			has[h.blockKey()] = true
		}
		for k := range r.blocked.keys {
			if !has[k] {
				delete(r.blocked.keys, k)
			}
		}
	}
	return heads, nil
}

// updateBlocked updates the blocked keys after a batch: a key whose row
// failed for a reason that may pass is blocked, so that its later rows do
// not overtake that row; a blocked key whose probed row got through (or was
// refused) is free again.
func (r *Relay) updateBlocked(out publishOutcome, heads []row) {
	b := &r.blocked
	now := r.cfg.Clock.Now()
	failed := make(map[blockKey]bool, len(out.failed))
	for _, rw := range out.failed {
		failed[rw.blockKey()] = true
	}
	probed, probeFailed := len(heads) > 0, !out.judged
	if out.judged {
		for _, h := range heads {
			k := h.blockKey()
			if failed[k] {
				probeFailed = true
			} else {
				delete(b.keys, k)
			}
		}
	}
	wasBlocked := len(b.keys) > 0
	for k := range failed {
		if len(b.keys) >= r.maxBlocked() {
			break
		}
		b.keys[k] = struct{}{}
	}
	switch {
	case len(b.keys) == 0:
		b.delay = probeFirst
	case probed && probeFailed:
		b.delay = min(b.delay*2, probeMax)
		b.at = now.Add(b.delay)
	case probed:
		// Kafka takes the blocked keys' rows again: retry the others now.
		b.delay = probeFirst
		b.at = now
	case !wasBlocked:
		b.delay = probeFirst
		b.at = now.Add(b.delay)
	}
}

// probeIn is roundResult.probeIn.
func (r *Relay) probeIn() time.Duration {
	if len(r.blocked.keys) == 0 {
		return 0
	}
	if d := r.blocked.at.Sub(r.cfg.Clock.Now()); d > 0 {
		return d
	}
	return -1
}
