package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DupCounter follows the consumers' duplicate counters,
// choreo_events_handled_total{outcome="duplicate"}, of every instance
// across restarts: a process's counter starts again from zero, so the
// counter keeps, per service, the sum of every rise it saw. An instance
// is read every interval, and just before the suite kills or restarts it
// (Before); what a process counted after its last read and before it
// crashed on its own is lost, which only makes a pass's duplicates look
// fewer than they were.
type DupCounter struct {
	Cluster *Cluster

	hc    *http.Client
	mu    sync.Mutex
	last  map[string]dupSample // by instance name
	total map[string]int       // by service
}

// dupSample is one read of an instance: which of its processes
// (Instance.Starts) and the sum of its duplicate counters.
type dupSample struct {
	starts int
	value  int
}

// NewDupCounter returns a counter of c's instances.
func NewDupCounter(c *Cluster) *DupCounter {
	return &DupCounter{Cluster: c, hc: &http.Client{Timeout: time.Second}, last: map[string]dupSample{}, total: map[string]int{}}
}

// Watch reads every instance each interval until ctx ends.
func (d *DupCounter) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, i := range d.Cluster.Instances {
			d.read(ctx, i)
		}
	}
}

// Before reads i now, as it is about to be stopped. A nil counter does
// nothing.
func (d *DupCounter) Before(ctx context.Context, i *Instance) {
	if d != nil {
		d.read(ctx, i)
	}
}

// Totals reads every instance and returns the duplicates counted so far,
// by service. A nil counter counts none.
func (d *DupCounter) Totals(ctx context.Context) map[string]int {
	out := map[string]int{}
	if d == nil {
		return out
	}
	for _, i := range d.Cluster.Instances {
		d.read(ctx, i)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for s, n := range d.total {
		out[s] = n
	}
	return out
}

// read reads i's counters, if it runs, and adds their rise since its last
// read: the whole value if another process answers now.
func (d *DupCounter) read(ctx context.Context, i *Instance) {
	if !i.Running() {
		return // a frozen one would only cost a timeout; it counts nothing meanwhile
	}
	starts := i.Starts()
	m, err := Metrics(ctx, d.hc, i.Port, "choreo_events_handled_total")
	if err != nil || i.Starts() != starts {
		return // which process answered is not known
	}
	value := 0
	for labels, v := range m {
		if strings.Contains(labels, `outcome="duplicate"`) {
			value += int(v)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, seen := d.last[i.Name()]
	switch {
	case !seen || prev.starts != starts || value < prev.value:
		d.total[i.Service] += value
	default:
		d.total[i.Service] += value - prev.value
	}
	d.last[i.Name()] = dupSample{starts: starts, value: value}
}
