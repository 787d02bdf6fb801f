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
// by its new value. Completions are the finishes of sagas that passed
// every service (ShipmentScheduled): a stop of inventory or shipping
// shows there even while declined payments keep finishing.
type Observer struct {
	mu          sync.Mutex
	finishes    []time.Time
	completions []time.Time
	count       int
}

// Watch scrapes until ctx ends.
func (o *Observer) Watch(ctx context.Context, c *Cluster, interval time.Duration) {
	hc := &http.Client{Timeout: interval}
	last, lastDone := map[string]float64{}, map[string]float64{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rose, done := 0.0, 0.0
		for _, i := range c.Serving("order") {
			m, err := Metrics(ctx, hc, i.Port, "choreo_events_handled_total")
			if err != nil {
				continue
			}
			sum, completed := 0.0, 0.0
			for labels, v := range m {
				if strings.Contains(labels, `outcome="applied"`) {
					sum += v
					if strings.Contains(labels, `type="ShipmentScheduled"`) {
						completed += v
					}
				}
			}
			rose += risen(last, i.Name(), sum)
			done += risen(lastDone, i.Name(), completed)
		}
		o.mu.Lock()
		if rose > 0 {
			o.finishes = append(o.finishes, time.Now())
			o.count += int(rose)
		}
		if done > 0 {
			o.completions = append(o.completions, time.Now())
		}
		o.mu.Unlock()
	}
}

// risen returns how much counter key rose since last[key] and records
// sum: nothing on the first scrape (a baseline), sum itself after a
// restart reset it.
func risen(last map[string]float64, key string, sum float64) float64 {
	prev, seen := last[key]
	last[key] = sum
	switch {
	case !seen:
		return 0
	case sum < prev:
		return sum
	}
	return sum - prev
}

// Completions returns the times at which sagas were seen completing.
func (o *Observer) Completions() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Time(nil), o.completions...)
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
