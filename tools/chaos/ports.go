package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Ports are the TCP ports of one run, all on 127.0.0.1: Kafka node I
// listens on Kafka+2(I-1) and its controller on Kafka+1+2(I-1),
// PostgreSQL on PG, instance i of service s on HTTP+s+100(i-1), the
// Kafka Connect worker (-relay debezium) on Connect.
type Ports struct {
	Kafka, PG, HTTP, Connect int
}

// portSlots is how many candidate sets of ports a run tries (see slot).
const portSlots = 10

// slot returns the n-th candidate set of ports: the defaults (Kafka
// 19092–19097, PostgreSQL 15432, HTTP 18080–18083 and 18180–18183)
// shifted by n, so that up to portSlots runs on one machine never share
// a port. All stay below Linux's ephemeral range (32768 on), from which
// outgoing connections would take ports at random.
func slot(n int) Ports {
	return Ports{Kafka: 19092 + 10*n, PG: 15432 + n, HTTP: 18080 + 10*n, Connect: 18280 + 10*n}
}

// List returns every port p needs for a cluster of nodes brokers and the
// service instances.
func (p Ports) List(nodes int) []int {
	var out []int
	for i := range nodes {
		out = append(out, p.Kafka+2*i, p.Kafka+1+2*i)
	}
	out = append(out, p.PG)
	for n := range MaxInstances {
		for s := range Services {
			out = append(out, p.HTTP+s+100*n)
		}
	}
	return append(out, p.Connect)
}

// choosePorts returns the first candidate that claim grants (so that two
// runs never settle on one slot at once) and whose every port is free,
// with the function that gives the claim back. A claimed candidate with a
// busy port is given back at once. The error lists what was busy.
func choosePorts(cands []Ports, nodes int, free func(port int) bool, claim func(Ports) (release func(), ok bool)) (Ports, func(), error) {
	var why []string
	for _, c := range cands {
		release, ok := claim(c)
		if !ok {
			why = append(why, fmt.Sprintf("kafka %d: claimed by another run", c.Kafka))
			continue
		}
		var busy []string
		for _, p := range c.List(nodes) {
			if !free(p) {
				busy = append(busy, fmt.Sprint(p))
			}
		}
		if len(busy) == 0 {
			return c, release, nil
		}
		release()
		why = append(why, fmt.Sprintf("kafka %d: busy %s", c.Kafka, strings.Join(busy, ",")))
	}
	return Ports{}, nil, fmt.Errorf("no free set of ports (pass -kafka-port, -pg-port and -port-base): %s", strings.Join(why, "; "))
}

// portFree reports whether nothing listens on 127.0.0.1:port, by
// listening there for a moment.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// claimSlot takes an exclusive lock on a file named after the candidate's
// Kafka port in the temp dir, held until release or until this process
// ends, however it ends: two runs checking the same free ports at the same
// moment cannot both take them. (A run whose infrastructure outlived it is
// caught by the port check instead.)
func claimSlot(c Ports) (func(), bool) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("choreo-chaos-ports-%d.lock", c.Kafka))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// FreePorts picks the run's ports: the first of the portSlots candidates
// that no other run claims and whose ports are all free. Call the
// returned release when the run's infrastructure is down.
func FreePorts(nodes int) (Ports, func(), error) {
	cands := make([]Ports, portSlots)
	for n := range cands {
		cands[n] = slot(n)
	}
	return choosePorts(cands, nodes, portFree, claimSlot)
}
