package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/choreo-saga/choreo/internal/workload"
)

// api talks to the services over HTTP with one pooled client, sized for
// many requests in flight (the default keeps only two idle connections
// per host, so an open-loop run would spend its time in TCP handshakes),
// as an operator for the setup and as each order's customer for the rest.
type api struct {
	order, payment, inventory string
	http                      *http.Client
	tokens                    workload.Tokens
}

func newAPI(order, payment, inventory string, tokens workload.Tokens) *api {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 512, 512
	return &api{order: order, payment: payment, inventory: inventory, tokens: tokens,
		http: &http.Client{Transport: t, Timeout: 30 * time.Second}}
}

// do sends body as JSON with token and decodes a 2xx answer into v
// (workload.Do).
func (a *api) do(ctx context.Context, token, method, url string, hdr map[string]string, body, v any) error {
	_, err := workload.Do(ctx, a.http, token, method, url, hdr, body, v)
	return err
}

// order is what GET /orders/{id} tells the load tool: its status and the
// server's own timestamps, whose difference is the saga's latency
// whatever the polling interval.
type order struct {
	ID           string    `json:"id"`
	Status       string    `json:"status"`
	CancelReason string    `json:"cancel_reason"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// terminal reports whether the saga has ended.
func (o order) terminal() bool { return o.Status == "COMPLETED" || o.Status == "CANCELLED" }

// outcome is the order's end as workload.Kind.Outcome spells it.
func (o order) outcome() string {
	if o.Status == "CANCELLED" {
		return o.Status + "/" + o.CancelReason
	}
	return o.Status
}

// place sends POST /orders under the order's Idempotency-Key, as its
// customer.
func (a *api) place(ctx context.Context, w workload.Order) (order, error) {
	var o order
	err := a.do(ctx, a.tokens.Customer(w.Customer), http.MethodPost, a.order+"/orders", map[string]string{"Idempotency-Key": w.Key}, w.Body(), &o)
	return o, err
}

// get reads one order of customer, as they would.
func (a *api) get(ctx context.Context, customer, id string) (order, error) {
	var o order
	err := a.do(ctx, a.tokens.Customer(customer), http.MethodGet, a.order+"/orders/"+id, nil, nil, &o)
	return o, err
}

// setup creates the world's accounts and stock, create-only
// (If-None-Match: *), sixteen requests at a time, as an operator.
func (a *api) setup(ctx context.Context, w workload.World) error {
	sem := make(chan struct{}, 16)
	var mu sync.Mutex
	var errs error
	var wg sync.WaitGroup
	put := func(url string, body any) {
		defer wg.Done()
		defer func() { <-sem }()
		if err := a.do(ctx, a.tokens.Operator, http.MethodPut, url, map[string]string{"If-None-Match": "*"}, body, nil); err != nil {
			mu.Lock()
			errs = errors.Join(errs, fmt.Errorf("PUT %s: %w", url, err))
			mu.Unlock()
		}
	}
	for c, balance := range w.Balance {
		sem <- struct{}{}
		wg.Add(1)
		go put(a.payment+"/accounts/"+c, map[string]any{"balance": balance, "currency": "JPY"})
	}
	for sku, units := range w.Stock {
		sem <- struct{}{}
		wg.Add(1)
		go put(a.inventory+"/stock/"+sku, map[string]any{"available": units})
	}
	wg.Wait()
	return errs
}
