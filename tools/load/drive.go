package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-saga/choreo/internal/workload"
)

// Step is one offered load: open loop (Rate orders a second, sent on
// schedule whatever the system's latency, so a slow system cannot slow
// the load down and hide its own queueing) or closed loop (Clients that
// each place an order and wait for its end before the next).
type Step struct {
	Open     bool
	Rate     float64
	Clients  int
	Duration time.Duration
	// Drain is how long, after the last order is sent, the step waits for
	// the sagas in flight to end before it counts them unfinished.
	Drain time.Duration
	// MaxInFlight bounds the open loop's outstanding orders; sends past
	// it are refused (counted), so an overloaded system cannot exhaust
	// the load tool's memory.
	MaxInFlight int
}

// Loader runs steps against one system.
type Loader struct {
	api      *api
	mu       sync.Mutex
	planner  *workload.Planner
	progress time.Duration
	log      io.Writer
	polls    chan struct{} // bounds concurrent GETs
}

func (l *Loader) next() workload.Order {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.planner.Next()
}

// Run offers st's load and returns what came of it.
func (l *Loader) Run(ctx context.Context, st Step) StepResult {
	stats := newStats()
	start := time.Now()
	stop := start.Add(st.Duration)
	// Sagas still running at giveUp are counted unfinished.
	watchCtx, cancel := context.WithDeadline(ctx, stop.Add(st.Drain))
	defer cancel()
	done := make(chan struct{})
	go l.report(stats, start, st.Open, done)

	var wg sync.WaitGroup
	if st.Open {
		// Open loop: most sagas are looked at only once the load is
		// sent (settle), so that polling does not load the system under
		// test while it is measured; every sampleEvery-th is followed
		// live, for the progress line.
		var posting atomic.Int64
		var mu sync.Mutex
		var later []placedOrder
		// The POSTs, apart from the live follows: settling starts once
		// every order is placed, not after the slowest sampled saga.
		var posts sync.WaitGroup
		interval := time.Duration(float64(time.Second) / st.Rate)
		for i := 0; ; i++ {
			due := start.Add(time.Duration(i) * interval)
			if !due.Before(stop) || !sleepUntil(ctx, due) {
				break
			}
			if st.MaxInFlight > 0 && posting.Load() >= int64(st.MaxInFlight) {
				stats.placed(0, fmt.Errorf("more than %d POSTs unanswered", st.MaxInFlight))
				continue
			}
			posts.Add(1)
			posting.Add(1)
			go func() {
				defer posts.Done()
				w := l.next()
				o, ok := l.place(ctx, w, stats)
				posting.Add(-1)
				switch {
				case !ok:
				case i%sampleEvery == 0:
					stats.sampled()
					wg.Add(1)
					go func() {
						defer wg.Done()
						l.follow(watchCtx, placedOrder{o, w, true}, stats)
					}()
				default:
					mu.Lock()
					later = append(later, placedOrder{o, w, false})
					mu.Unlock()
				}
			}()
		}
		posts.Wait()
		stats.settling()
		l.settle(watchCtx, later, stats)
	} else {
		for range st.Clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) && ctx.Err() == nil {
					w := l.next()
					if o, ok := l.place(ctx, w, stats); ok {
						l.follow(watchCtx, placedOrder{o, w, false}, stats)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(done)
	mode := "closed"
	if st.Open {
		mode = "open"
	}
	return stats.result(mode, st.Rate, st.Clients, st.Duration)
}

// sampleEvery: in an open loop, one order in this many is followed live.
const sampleEvery = 20

// placedOrder is an order the system accepted, and what it was built to
// do; sampled if the open loop follows it live.
type placedOrder struct {
	o       order
	w       workload.Order
	sampled bool
}

// place sends one order; false if it was refused.
func (l *Loader) place(ctx context.Context, w workload.Order, stats *Stats) (order, bool) {
	t0 := time.Now()
	o, err := l.api.place(ctx, w)
	stats.placed(time.Since(t0), err)
	return o, err == nil
}

// follow polls an order until it ends (or ctx does) and records it.
func (l *Loader) follow(ctx context.Context, p placedOrder, stats *Stats) {
	if o, ok := l.watch(ctx, p.w.Customer, p.o); ok {
		stats.ended(o, p.w.Kind.Outcome(), p.sampled)
		return
	}
	stats.gaveUp()
}

// settle follows the orders the open loop left for later, sixteen at a
// time: one GET for a saga that has ended, which by then most have.
func (l *Loader) settle(ctx context.Context, ps []placedOrder, stats *Stats) {
	work := make(chan placedOrder)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for p := range work {
				// Most have ended by now: look at once, then as follow does.
				if o, err := l.api.get(ctx, p.w.Customer, p.o.ID); err == nil {
					p.o = o
				}
				l.follow(ctx, p, stats)
			}
		})
	}
	for _, p := range ps {
		work <- p
	}
	close(work)
	wg.Wait()
}

// watch polls an order of customer until it ends or ctx does. The latency is taken
// from the order's own timestamps, so the polling interval only delays
// when the end is noticed, not what is measured: it starts at 20 ms and
// doubles to 500 ms, which keeps the GETs a small fraction of the load.
func (l *Loader) watch(ctx context.Context, customer string, o order) (order, bool) {
	wait := 20 * time.Millisecond
	for !o.terminal() {
		if !sleepUntil(ctx, time.Now().Add(wait)) {
			return o, false
		}
		wait = min(2*wait, 500*time.Millisecond)
		l.polls <- struct{}{}
		got, err := l.api.get(ctx, customer, o.ID)
		<-l.polls
		if err == nil {
			o = got
		}
	}
	return o, true
}

// report prints a progress line (Stats.progress) every l.progress until
// done.
func (l *Loader) report(s *Stats, start time.Time, open bool, done <-chan struct{}) {
	if l.progress <= 0 {
		return
	}
	t := time.NewTicker(l.progress)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		fmt.Fprintln(l.log, s.progress(time.Since(start), open))
	}
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
