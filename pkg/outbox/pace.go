// This file decides when Run's next round runs, and waits for it: at once
// while rows flow, after a backoff while rounds fail with nothing moving,
// soon while rows are held back behind a running transaction (its end
// sends no NOTIFY), else on the next wake-up or poll.
// TestProgressSkipsFailureBackoff, TestRunRetriesRowsHeldBack,
// TestRunBacksOffWhileRowsAreHeldBack and
// TestHeldBackRetryBacksOffOnlyByItsOwnRetries show why.

package outbox

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// heldBackRetry is how soon Run first looks again at rows a round had to
// hold back; each retry that finds them still held doubles it, up to the poll.
const heldBackRetry = 10 * time.Millisecond

// pace is what Run remembers between rounds.
type pace struct {
	failures int           // rounds in a row that failed with nothing moving
	held     time.Duration // the wait for rows held back, doubled by each retry that finds them so
	heldDue  bool          // the retry Run waits for is the held-back one
	dozing   dozing        // whether writers notify (notify.go)
}

// next is what Run does after a round: go on at once, sleep for backoff
// deaf to wake-ups, or wait for one, at most retryIn if it is above 0.
type next struct {
	now     bool
	backoff time.Duration
	retryIn time.Duration
}

func (p *pace) after(ctx context.Context, r *Relay, res roundResult, err error) next {
	progress := res.published+res.refused > 0
	if progress {
		p.dozing.flowing(ctx, r)
	}
	if err != nil {
		publishFailures.WithLabelValues(r.cfg.Name).Inc()
		if !progress {
			p.failures++
			delay := min(time.Duration(1<<min(p.failures, 6))*50*time.Millisecond, 3*time.Second, r.tick())
			r.log.Error("publish failed; will retry", "err", err, "retry_in", delay)
			return next{backoff: delay}
		}
		// Some rows got out: the failing ones must not slow down the rest.
		r.log.Warn("publish partly failed; continuing", "err", err,
			"published", res.published, "refused", res.refused)
	}
	p.failures = 0
	if progress && (err != nil || res.full) || res.probeIn < 0 {
		return next{now: true} // more is waiting
	}
	writersIn, now := p.dozing.idle(ctx, r, res.leader)
	if now {
		return next{now: true}
	}

	var retryIn time.Duration // 0: wait for a wake-up
	p.heldDue = res.heldBack
	if res.heldBack {
		if progress || p.held == 0 {
			p.held = heldBackRetry // back off only while nothing moves
		}
		retryIn = p.held
	} else {
		p.held = 0
		retryIn = max(res.probeIn, 0) // blocked keys to retry (probe.go)
	}
	if writersIn > 0 && (retryIn == 0 || writersIn < retryIn) {
		retryIn, p.heldDue = writersIn, false
	}
	return next{retryIn: retryIn}
}

// wait blocks until a NOTIFY, the poll, retryIn if > 0, or the end of ctx,
// and reports whether ctx is still live.
func (p *pace) wait(ctx context.Context, r *Relay, wake <-chan struct{}, poll *Timer, retryIn time.Duration) bool {
	var retry <-chan time.Time
	if retryIn > 0 {
		t := r.cfg.Clock.NewTimer(retryIn)
		defer t.Stop()
		retry = t.C()
	}
	observe(r, "wait")
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-(*poll).C():
		*poll = r.cfg.Clock.NewTimer(r.tick())
	case <-retry:
		observe(r, "retry")
		if p.heldDue {
			// Only the held-back retry lengthens its wait: rounds that
			// NOTIFYs or writers start say nothing about the holder.
			p.held = min(p.held*2, r.tick())
		}
	}
	return true
}

// heldBack reports whether committed rows wait behind a transaction still
// running elsewhere in the cluster.
func heldBack(ctx context.Context, conn *sqlx.Conn) (bool, error) {
	var held bool
	if err := conn.GetContext(ctx, &held, `
		SELECT EXISTS (
			SELECT 1 FROM outbox
			WHERE sent_at IS NULL AND refused_at IS NULL
			  AND txid >= pg_snapshot_xmin(pg_current_snapshot()))`); err != nil {
		return false, fmt.Errorf("outbox: look for held-back rows: %w", err)
	}
	return held, nil
}

// backoff is a wait that doubles each time it is taken, until reset.
type backoff struct{ next time.Duration }

func (b *backoff) take(first, most time.Duration) time.Duration {
	d := cmp.Or(b.next, first)
	b.next = min(d*2, most)
	return d
}

func (b *backoff) reset() { b.next = 0 }

// tick is the longest Run waits between rounds: the leader's heartbeat
// (Lease/3 keeps its session well inside idle_session_timeout) and a
// standby's bid for the lock.
func (r *Relay) tick() time.Duration { return min(r.cfg.PollInterval, r.cfg.Lease/3) }

// sleep waits d on clock or until ctx ends, reporting whether the full
// wait elapsed.
func sleep(ctx context.Context, clock Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
