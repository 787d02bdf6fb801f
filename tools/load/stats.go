package main

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Stats gathers one step's outcomes as its orders end. Latencies go into
// HdrHistograms (microseconds, 3 significant digits, up to an hour), so
// percentiles are exact to 0.1% however many sagas a run has.
type Stats struct {
	mu         sync.Mutex
	saga, post *hdrhistogram.Histogram
	sent       int
	refused    int // POST answered 4xx/5xx or not at all
	completed  int
	cancelled  int
	unexpected int // ended otherwise than its kind must
	unfinished int // still running when the drain gave up
	// The open loop follows one order in sampleEvery live while it
	// sends (the rest once it is done): these count those orders, from
	// which the progress line estimates the rest.
	sampledPlaced, sampledEnded int
	settled                     bool // the open loop has sent everything
	first                       time.Time
	last                        time.Time
	examples                    []string // a few unexpected outcomes, for the report
}

func newStats() *Stats {
	return &Stats{
		saga: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
		post: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
	}
}

func (s *Stats) placed(post time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	if err != nil {
		s.refused++
		return
	}
	_ = s.post.RecordValue(max(1, post.Microseconds()))
}

// sampled counts an order the open loop follows live.
func (s *Stats) sampled() {
	s.mu.Lock()
	s.sampledPlaced++
	s.mu.Unlock()
}

// settling marks the open loop's end of sending: from now on every order
// is looked at, so the counts are exact.
func (s *Stats) settling() {
	s.mu.Lock()
	s.settled = true
	s.mu.Unlock()
}

// ended records a terminal order: its saga latency is the server's
// updated_at − created_at, and the step's window runs from the first
// order created to the last one ended, both by the server's clock.
// sampled says the open loop followed it live.
func (s *Stats) ended(o order, want string, sampled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sampled {
		s.sampledEnded++
	}
	_ = s.saga.RecordValue(max(1, o.UpdatedAt.Sub(o.CreatedAt).Microseconds()))
	if o.Status == "COMPLETED" {
		s.completed++
	} else {
		s.cancelled++
	}
	if got := o.outcome(); got != want {
		s.unexpected++
		if len(s.examples) < 5 {
			s.examples = append(s.examples, fmt.Sprintf("order %s ended %s, want %s", o.ID, got, want))
		}
	}
	if s.first.IsZero() || o.CreatedAt.Before(s.first) {
		s.first = o.CreatedAt
	}
	if o.UpdatedAt.After(s.last) {
		s.last = o.UpdatedAt
	}
}

func (s *Stats) gaveUp() {
	s.mu.Lock()
	s.unfinished++
	s.mu.Unlock()
}

// progress is the line report prints, elapsed into the step. A closed
// loop, and an open one once it has sent everything, knows every order's
// state. An open loop still sending looks only at one order in
// sampleEvery, so it scales what that sample shows to all it sent, and
// says so: printing the sample's raw count would read as a system
// finishing a twentieth of its sagas.
func (s *Stats) progress(elapsed time.Duration, open bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := elapsed.Seconds()
	latency := fmt.Sprintf("saga p50 %.0fms p99 %.0fms", float64(s.saga.ValueAtQuantile(50))/1000, float64(s.saga.ValueAtQuantile(99))/1000)
	ended := s.completed + s.cancelled
	switch {
	case !open:
		return fmt.Sprintf("[load] %5.0fs sent %d, refused %d; ended %d (%.0f/s), not yet %d; %s",
			secs, s.sent, s.refused, ended, float64(ended)/secs, s.sent-s.refused-ended-s.unfinished, latency)
	case s.settled:
		return fmt.Sprintf("[load] %5.0fs all %d sent, refused %d; now checking each: ended %d, not yet %d; %s",
			secs, s.sent, s.refused, ended, s.sent-s.refused-ended-s.unfinished, latency)
	case s.sampledPlaced == 0:
		return fmt.Sprintf("[load] %5.0fs sent %d (%.0f/s), refused %d; none followed yet", secs, s.sent, float64(s.sent)/secs, s.refused)
	}
	accepted := s.sent - s.refused
	est := int(math.Round(float64(accepted) * float64(s.sampledEnded) / float64(s.sampledPlaced)))
	return fmt.Sprintf("[load] %5.0fs sent %d (%.0f/s), refused %d; ended ~%d (~%.0f/s), not yet ~%d, estimated from the 1 in %d followed live (%d of %d ended); %s",
		secs, s.sent, float64(s.sent)/secs, s.refused, est, float64(est)/secs, accepted-est, sampleEvery, s.sampledEnded, s.sampledPlaced, latency)
}

// inFlight is how many placed orders have not ended yet.
func (s *Stats) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent - s.refused - s.completed - s.cancelled - s.unfinished
}

// Latency is a distribution summary in milliseconds.
type Latency struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// StepResult is one step of a run: an offered load and what the system
// made of it.
type StepResult struct {
	Mode        string  `json:"mode"`
	OfferedRate float64 `json:"offered_rate,omitempty"` // open loop, orders/s
	Clients     int     `json:"clients,omitempty"`      // closed loop
	Duration    string  `json:"duration"`
	Sent        int     `json:"sent"`
	Refused     int     `json:"refused"`
	Completed   int     `json:"completed"`
	Cancelled   int     `json:"cancelled"`
	Unexpected  int     `json:"unexpected"`
	Unfinished  int     `json:"unfinished"`
	// Throughput is ended sagas per second over the server's window, from
	// the first order created to the last one ended.
	Throughput float64  `json:"throughput"`
	Saga       Latency  `json:"saga_latency"`
	Post       Latency  `json:"post_latency"`
	Examples   []string `json:"unexpected_examples,omitempty"`
}

func (s *Stats) result(mode string, rate float64, clients int, d time.Duration) StepResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := StepResult{
		Mode: mode, OfferedRate: rate, Clients: clients, Duration: d.String(),
		Sent: s.sent, Refused: s.refused, Completed: s.completed, Cancelled: s.cancelled,
		Unexpected: s.unexpected, Unfinished: s.unfinished,
		Saga: summarize(s.saga), Post: summarize(s.post), Examples: s.examples,
	}
	if w := s.last.Sub(s.first).Seconds(); w > 0 {
		r.Throughput = float64(s.completed+s.cancelled) / w
	}
	return r
}

// Line is the one-line summary printed after a step.
func (r StepResult) Line() string {
	load := fmt.Sprintf("%d clients", r.Clients)
	if r.Mode == "open" {
		load = fmt.Sprintf("%.0f/s offered", r.OfferedRate)
	}
	return fmt.Sprintf("%s: %d sagas ended (%d completed, %d cancelled) at %.1f/s; saga p50 %.1fms p99 %.1fms p99.9 %.1fms max %.1fms; POST p99 %.1fms; refused %d, unfinished %d, unexpected %d",
		load, r.Completed+r.Cancelled, r.Completed, r.Cancelled, r.Throughput, r.Saga.P50, r.Saga.P99, r.Saga.P999, r.Saga.Max, r.Post.P99, r.Refused, r.Unfinished, r.Unexpected)
}
