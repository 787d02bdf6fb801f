package main

import (
	"math/rand/v2"

	"github.com/choreo-saga/choreo/internal/workload"
)

// Request is one order a client places, under its own Idempotency-Key:
// a workload order, with where the client sends it.
type Request struct {
	workload.Order
	// Instance is the order instance (1-based) the first attempt goes to.
	Instance int `json:"instance"`
	// Replay: once answered, the client sends the request again on the
	// other instance (one in ten).
	Replay bool `json:"replay,omitempty"`
}

// NewWorld names customers and SKUs for a run (tag keeps runs apart when
// the infrastructure is reused): customers that can pay and SKUs in
// stock, plus a tenth as many that cannot pay and that have no units
// (workload.NewWorld).
func NewWorld(tag string, customers, skus int) workload.World {
	return workload.NewWorld("chaos-"+tag, customers, skus)
}

// Plan returns n orders for world w, the same for the same seed: the
// workload's default mix (80% happy, 20% that compensate), spread over the
// order instances.
func Plan(seed int64, tag string, n int, w workload.World) []Request {
	orders := workload.Plan(seed, "chaos-"+tag, n, w, workload.DefaultMix)
	r := rand.New(rand.NewPCG(uint64(seed), 0x696e7374)) //nolint:gosec // a seeded spread, not a secret
	reqs := make([]Request, n)
	for i, o := range orders {
		reqs[i] = Request{Order: o, Instance: 1 + r.IntN(Instances), Replay: r.IntN(10) == 0}
	}
	return reqs
}
