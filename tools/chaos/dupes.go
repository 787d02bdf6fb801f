package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
)

// DupCounter counts, by service, the duplicates the consumers skipped: the
// "duplicate event skipped" lines in every instance's log (and any twin's).
// A log file outlives the processes that wrote to it, a crashed one
// included, where a scraped counter would die with its process and count
// too few.
type DupCounter struct {
	Cluster *Cluster
}

// NewDupCounter returns a counter of c's instances.
func NewDupCounter(c *Cluster) *DupCounter { return &DupCounter{Cluster: c} }

// dupLine is how the runtime logs a skipped duplicate (JSON, at INFO).
var dupLine = []byte(`"msg":"duplicate event skipped"`)

// Totals returns the duplicates counted so far, by service. A nil counter
// counts none.
func (d *DupCounter) Totals(context.Context) map[string]int {
	out := map[string]int{}
	if d == nil {
		return out
	}
	for svc, paths := range d.Cluster.Logs() {
		for _, p := range paths {
			out[svc] += countLines(p, dupLine)
		}
	}
	return out
}

// countLines is how many lines of the file at path hold needle; 0 if it
// cannot be read.
func countLines(path string, needle []byte) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), needle) {
			n++
		}
	}
	return n
}
