package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/choreo-saga/choreo/internal/workload"
)

// api is a small JSON-over-HTTP client with a per-request timeout, so a
// frozen (SIGSTOPped) instance costs a client one timeout, not forever.
// It sets up and reads back as an operator, and orders as each order's
// customer.
type api struct {
	hc     *http.Client
	tokens workload.Tokens
}

func newAPI(tokens workload.Tokens) *api {
	return &api{tokens: tokens, hc: &http.Client{
		Timeout:   4 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}}
}

// retriable reports whether a real client would send the request again:
// no answer at all, or a 5xx.
func retriable(err error) bool {
	var es *workload.StatusError
	if errors.As(err, &es) {
		return es.Code >= 500
	}
	return err != nil
}

// do sends a request with token and decodes a 2xx answer into v
// (workload.Do). It returns the response headers as well.
func (a *api) do(ctx context.Context, token, method, url string, hdr map[string]string, body any, v any) (http.Header, error) {
	return workload.Do(ctx, a.hc, token, method, url, hdr, body, v)
}

// retry calls f until it succeeds, fails for good (not retriable), or ctx
// ends, backing off from 100 ms to 2 s; f gets the attempt number.
func retry(ctx context.Context, f func(attempt int) error) error {
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := f(attempt)
		if !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Setup creates the world's accounts and stock over HTTP, spread over
// the instances.
func Setup(ctx context.Context, a *api, c *Cluster, w workload.World) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	put := func(svc, path string, i int, body any) {
		defer wg.Done()
		defer func() { <-sem }()
		err := retry(ctx, func(attempt int) error {
			_, err := a.do(ctx, a.tokens.Operator, http.MethodPut, c.URL(svc, 1+(i+attempt)%Instances)+path, nil, body, nil)
			return err
		})
		if err != nil {
			mu.Lock()
			first = errors.Join(first, fmt.Errorf("PUT %s: %w", path, err))
			mu.Unlock()
		}
	}
	i := 0
	for _, cust := range sortedKeys(w.Balance) {
		sem <- struct{}{}
		wg.Add(1)
		go put("payment", "/accounts/"+cust, i, map[string]int64{"balance": w.Balance[cust]})
		i++
	}
	for _, sku := range sortedKeys(w.Stock) {
		sem <- struct{}{}
		wg.Add(1)
		go put("inventory", "/stock/"+sku, i, map[string]int64{"available": w.Stock[sku]})
		i++
	}
	wg.Wait()
	return first
}

// Placed is what a client learnt placing one order.
type Placed struct {
	Key      string   `json:"key"`
	IDs      []string `json:"ids,omitempty"` // every order id a 201 carried
	Attempts int      `json:"attempts"`
	Retries  int      `json:"retries,omitempty"`
	Replayed int      `json:"replayed,omitempty"` // 201s marked Idempotent-Replayed
	// ReplayRefused: the replay of an answered request got a 4xx.
	ReplayRefused string    `json:"replay_refused,omitempty"`
	Rejected      string    `json:"rejected,omitempty"` // a 4xx: the order was refused
	GaveUp        string    `json:"gave_up,omitempty"`  // never answered: unsettled
	Accepted      time.Time `json:"accepted"`
}

// LoadStats sums up the load phase.
type LoadStats struct {
	Sent       int           `json:"sent"`
	Accepted   int           `json:"accepted"`
	Rejected   int           `json:"rejected"`
	Unsettled  int           `json:"unsettled"`
	Retries    int           `json:"retries"`
	Replays    int           `json:"replays"`
	Elapsed    time.Duration `json:"elapsed"`
	Rate       float64       `json:"rate"`
	MaxBacklog int           `json:"max_in_flight"`
}

// Load sends the planned orders open-loop: one every 1/rate seconds,
// whatever the system's latency (up to maxInFlight outstanding), each
// client retrying with the same Idempotency-Key, on the other order
// instance, after a connection error or a 5xx. Clients keep retrying up
// to giveUp after the last order was sent.
func Load(ctx context.Context, log *slog.Logger, a *api, c *Cluster, reqs []Request, rate float64, giveUp time.Duration) ([]Placed, LoadStats) {
	const maxInFlight = 512
	placed := make([]Placed, len(reqs))
	sendCtx, cancelSend := context.WithCancel(ctx)
	defer cancelSend()
	retryCtx, cancelRetry := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRetry()
	stop := context.AfterFunc(ctx, cancelRetry)
	defer stop()

	var mu sync.Mutex
	inFlight, maxSeen := 0, 0
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.Duration(float64(time.Second) / rate)
	sent := 0
	for i, q := range reqs {
		next := start.Add(time.Duration(i) * tick)
		select {
		case <-sendCtx.Done():
		case <-time.After(time.Until(next)):
		}
		if sendCtx.Err() != nil {
			break
		}
		sem <- struct{}{}
		mu.Lock()
		inFlight++
		maxSeen = max(maxSeen, inFlight)
		mu.Unlock()
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			placed[i] = place(retryCtx, a, c, q)
			<-sem
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
	}
	sentAll := time.Now()
	log.Info("load: every order sent; waiting for clients still retrying", "sent", sent, "in_flight", inFlight)
	timer := time.AfterFunc(giveUp, cancelRetry)
	wg.Wait()
	timer.Stop()
	st := LoadStats{Sent: sent, Elapsed: sentAll.Sub(start), MaxBacklog: maxSeen}
	st.Rate = float64(sent) / st.Elapsed.Seconds()
	out := placed[:sent]
	for _, p := range out {
		st.Retries += p.Retries
		st.Replays += p.Replayed
		switch {
		case len(p.IDs) > 0:
			st.Accepted++
		case p.Rejected != "":
			st.Rejected++
		default:
			st.Unsettled++
		}
	}
	return out, st
}

// place places one order as a careful client does: the same
// Idempotency-Key on every attempt, the next attempt on the other
// instance.
func place(ctx context.Context, a *api, c *Cluster, q Request) Placed {
	p := Placed{Key: q.Key}
	// post sends the order, its first attempt to instance from+1 and each
	// next one to the other instance.
	post := func(from int) func(attempt int) error {
		return func(attempt int) error {
			p.Attempts++
			p.Retries += min(attempt, 1)
			var o OrderView
			inst := 1 + (from+attempt)%Instances
			h, err := a.do(ctx, a.tokens.Customer(q.Customer), http.MethodPost, c.URL("order", inst)+"/orders", map[string]string{"Idempotency-Key": q.Key}, q.Body(), &o)
			if err != nil {
				return err
			}
			p.IDs = append(p.IDs, o.ID)
			if h.Get("Idempotent-Replayed") == "true" {
				p.Replayed++
			}
			return nil
		}
	}
	err := retry(ctx, post(q.Instance-1))
	if err == nil {
		p.Accepted = time.Now()
	}
	if err == nil && q.Replay {
		// A real client that got its answer stops; a few send the same
		// request again on the other instance, to test that one key makes
		// one order (the answer must be the same order).
		var es *workload.StatusError
		if errors.As(retry(ctx, post(q.Instance)), &es) {
			p.ReplayRefused = es.Error()
		}
	}
	if err != nil {
		var es *workload.StatusError
		if errors.As(err, &es) {
			p.Rejected = es.Error()
		} else {
			p.GaveUp = err.Error()
		}
	}
	return p
}
