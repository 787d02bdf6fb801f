package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Observer watches sagas finish: the order service consumes only the
// events that end a saga (ShipmentScheduled, PaymentDeclined,
// PaymentRefunded), so every increase of its
// choreo_events_handled_total{outcome="applied"} is a saga finishing.
// It scrapes every order instance (a twin too, while one runs) every
// interval and keeps the times at which the sum rose. A restarted
// instance's counter starts again from zero, which is counted as a rise
// by its new value.
type Observer struct {
	mu       sync.Mutex
	finishes []time.Time
	count    int
}

// Watch scrapes until ctx ends.
func (o *Observer) Watch(ctx context.Context, c *Cluster, interval time.Duration) {
	hc := &http.Client{Timeout: interval}
	last := map[string]float64{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rose := 0.0
		for _, i := range c.Serving("order") {
			m, err := Metrics(ctx, hc, i.Port, "choreo_events_handled_total")
			if err != nil {
				continue
			}
			sum := 0.0
			for labels, v := range m {
				if strings.Contains(labels, `outcome="applied"`) {
					sum += v
				}
			}
			prev, seen := last[i.Name()]
			switch {
			case !seen:
				// the first scrape is a baseline
			case sum < prev:
				rose += sum // restarted
			default:
				rose += sum - prev
			}
			last[i.Name()] = sum
		}
		if rose > 0 {
			o.mu.Lock()
			o.finishes = append(o.finishes, time.Now())
			o.count += int(rose)
			o.mu.Unlock()
		}
	}
}

// Finishes returns the times at which sagas were seen finishing.
func (o *Observer) Finishes() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Time(nil), o.finishes...)
}

// LongestStall returns the longest stretch within [from, to] in which no
// saga finished, given the sorted times at which some did, and when it
// began.
func LongestStall(finishes []time.Time, from, to time.Time) (time.Duration, time.Time) {
	longest, at := time.Duration(0), from
	prev := from
	for _, f := range finishes {
		if f.Before(from) {
			continue
		}
		if f.After(to) {
			break
		}
		if d := f.Sub(prev); d > longest {
			longest, at = d, prev
		}
		prev = f
	}
	if d := to.Sub(prev); d > longest {
		longest, at = d, prev
	}
	return longest, at
}
