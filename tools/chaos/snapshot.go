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

// get reads one resource from instance 1 or 2 of svc (the other one
// after an error), as an operator; found is false on a 404.
func get(ctx context.Context, a *api, c *Cluster, svc, path string, n int, v any) (found bool, err error) {
	err = retry(ctx, func(attempt int) error {
		_, err := a.do(ctx, a.tokens.Operator, http.MethodGet, c.URL(svc, 1+(n+attempt)%Instances)+path, nil, nil, v)
		if attempt >= 5 {
			var es *workload.StatusError
			if errors.As(err, &es) {
				return fmt.Errorf("%w (giving up)", err) // not retriable any more
			}
		}
		return err
	})
	var es *workload.StatusError
	if errors.As(err, &es) && es.Code == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// forEach runs f on every id with a few workers and joins the errors.
func forEach(ids []string, workers int, f func(n int, id string) error) error {
	var mu sync.Mutex
	var errs []error
	ch := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ch {
				if err := f(n, ids[n]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for n := range ids {
		ch <- n
	}
	close(ch)
	wg.Wait()
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("… and %d more errors", len(errs)-5))
	}
	return errors.Join(errs...)
}

// Drain polls the orders until none is PENDING or limit passes. It
// returns when the last one was seen finishing and how many are left.
func Drain(ctx context.Context, log *slog.Logger, a *api, c *Cluster, ids []string, limit time.Duration) (time.Time, int) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pending := ids
	last := time.Now()
	for round := 0; ; round++ {
		var mu sync.Mutex
		var still []string
		_ = forEach(pending, 8, func(n int, id string) error {
			var o OrderView
			ok, err := get(ctx, a, c, "order", "/orders/"+id, n, &o)
			if err != nil || !ok || (o.Status != "COMPLETED" && o.Status != "CANCELLED") {
				mu.Lock()
				still = append(still, id)
				mu.Unlock()
			}
			return nil
		})
		if len(still) < len(pending) {
			last = time.Now()
		}
		pending = still
		if len(pending) == 0 || ctx.Err() != nil {
			return last, len(pending)
		}
		if round%5 == 0 {
			log.Info("draining", "pending", len(pending))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Read takes the snapshot the checker judges: every accepted order in all
// four services, every account and SKU of the world.
func Read(ctx context.Context, a *api, c *Cluster, ids []string, w workload.World) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	s := Snapshot{
		Orders: map[string]*OrderView{}, Payments: map[string]*PaymentView{},
		Reservations: map[string]*ReservationView{}, Shipments: map[string]*ShipmentView{},
		Balances: map[string]int64{}, Stock: map[string]StockView{},
	}
	var mu sync.Mutex
	err := forEach(ids, 8, func(n int, id string) error {
		var (
			o  OrderView
			p  PaymentView
			r  ReservationView
			sh ShipmentView
		)
		var errs []error
		fetch := func(svc, path string, v any) bool {
			ok, err := get(ctx, a, c, svc, path, n, v)
			if err != nil {
				errs = append(errs, fmt.Errorf("GET %s%s: %w", svc, path, err))
			}
			return ok
		}
		okO := fetch("order", "/orders/"+id, &o)
		okP := fetch("payment", "/payments/"+id, &p)
		okR := fetch("inventory", "/reservations/"+id, &r)
		okS := fetch("shipping", "/shipments/"+id, &sh)
		mu.Lock()
		defer mu.Unlock()
		if okO {
			s.Orders[id] = &o
		}
		if okP {
			s.Payments[id] = &p
		}
		if okR {
			s.Reservations[id] = &r
		}
		if okS {
			s.Shipments[id] = &sh
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return s, err
	}
	custs, skus := sortedKeys(w.Balance), sortedKeys(w.Stock)
	err = forEach(custs, 8, func(n int, cust string) error {
		var acc struct {
			Balance int64 `json:"balance"`
		}
		ok, err := get(ctx, a, c, "payment", "/accounts/"+cust, n, &acc)
		if ok {
			mu.Lock()
			s.Balances[cust] = acc.Balance
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return s, err
	}
	err = forEach(skus, 8, func(n int, sku string) error {
		var st StockView
		ok, err := get(ctx, a, c, "inventory", "/stock/"+sku, n, &st)
		if ok {
			mu.Lock()
			s.Stock[sku] = st
			mu.Unlock()
		}
		return err
	})
	return s, err
}
