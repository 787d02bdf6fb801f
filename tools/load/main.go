// Command load drives the running system with orders and reports saga
// throughput and latency: from POST /orders to the order's terminal status,
// as a client polling GET /orders/{id} sees it.
//
//	make run    # or: go run ./deploy/local
//	go run ./tools/load -orders 1000 -concurrency 16
//
// It only talks to the addresses given (loopback by default) and stops after
// -orders orders or -timeout, whichever comes first.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type config struct {
	orders, concurrency  int
	orderURL, paymentURL string
	inventoryURL         string
	timeout              time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.IntVar(&c.orders, "orders", 500, "orders to place")
	fs.IntVar(&c.concurrency, "concurrency", 8, "clients placing orders at once")
	fs.StringVar(&c.orderURL, "order", "http://127.0.0.1:8080", "order service")
	fs.StringVar(&c.paymentURL, "payment", "http://127.0.0.1:8081", "payment service")
	fs.StringVar(&c.inventoryURL, "inventory", "http://127.0.0.1:8082", "inventory service")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	// One customer and SKU per run, with enough for every order.
	customer, sku := "load-"+uuid.NewString()[:8], "LOAD-"+uuid.NewString()[:8]
	if err := put(ctx, c.paymentURL+"/accounts/"+customer, map[string]int64{"balance": int64(c.orders) * 100}); err != nil {
		return err
	}
	if err := put(ctx, c.inventoryURL+"/stock/"+sku, map[string]int64{"available": int64(c.orders)}); err != nil {
		return err
	}

	var next atomic.Int64
	latencies := make([]time.Duration, 0, c.orders)
	var mu sync.Mutex
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(c.orders) && ctx.Err() == nil {
				d, err := placeAndWait(ctx, c.orderURL, customer, sku)
				if err != nil {
					failed.Add(1)
					fmt.Fprintln(os.Stderr, "load:", err)
					continue
				}
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(latencies) == 0 {
		return fmt.Errorf("no order completed (%d failed)", failed.Load())
	}
	slices.Sort(latencies)
	q := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Fprintf(out, "orders completed: %d (failed %d) in %s with %d clients\n", len(latencies), failed.Load(), elapsed.Round(time.Millisecond), c.concurrency)
	fmt.Fprintf(out, "throughput: %.1f sagas/s\n", float64(len(latencies))/elapsed.Seconds())
	fmt.Fprintf(out, "latency POST → COMPLETED: p50 %s  p95 %s  p99 %s  max %s\n",
		q(0.50).Round(time.Millisecond), q(0.95).Round(time.Millisecond), q(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	return nil
}

// placeAndWait places one order and polls until it is terminal.
func placeAndWait(ctx context.Context, base, customer, sku string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{
		"customer_id":      customer,
		"items":            []map[string]any{{"sku": sku, "quantity": 1, "unit_price": 100}},
		"currency":         "JPY",
		"shipping_address": map[string]string{"country": "JP"},
	})
	start := time.Now()
	var o struct{ ID, Status string }
	if err := do(ctx, http.MethodPost, base+"/orders", body, http.StatusCreated, &o); err != nil {
		return 0, err
	}
	for {
		if err := do(ctx, http.MethodGet, base+"/orders/"+o.ID, nil, http.StatusOK, &o); err != nil {
			return 0, err
		}
		switch o.Status {
		case "COMPLETED":
			return time.Since(start), nil
		case "CANCELLED":
			return 0, fmt.Errorf("order %s cancelled", o.ID)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func put(ctx context.Context, url string, v any) error {
	body, _ := json.Marshal(v)
	return do(ctx, http.MethodPut, url, body, http.StatusOK, nil)
}

func do(ctx context.Context, method, url string, body []byte, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d: %s", method, url, resp.StatusCode, b)
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}
