package main

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPortsList(t *testing.T) {
	got := slot(0).List(3)
	want := []int{19092, 19093, 19094, 19095, 19096, 19097, 15432,
		18080, 18081, 18082, 18083, 18180, 18181, 18182, 18183, 18280}
	if !slices.Equal(got, want) {
		t.Fatalf("slot(0).List(3) = %v, want %v", got, want)
	}
}

// TestSlotsDoNotOverlap: two runs in different slots never share a port.
func TestSlotsDoNotOverlap(t *testing.T) {
	owner := map[int]int{}
	for n := range portSlots {
		for _, p := range slot(n).List(3) {
			if o, ok := owner[p]; ok {
				t.Fatalf("port %d is in slot %d and slot %d", p, o, n)
			}
			if p >= 32768 {
				t.Fatalf("slot %d: port %d is in the ephemeral range", n, p)
			}
			owner[p] = n
		}
	}
}

func TestChoosePorts(t *testing.T) {
	cands := []Ports{slot(0), slot(1), slot(2)}
	tests := []struct {
		name    string
		busy    []int // ports something listens on
		claimed []int // Kafka ports of slots another run holds
		want    int   // Kafka port of the chosen slot; 0: an error
		wantErr string
	}{
		{name: "AllFree", want: 19092},
		{name: "BrokerPortBusy", busy: []int{19092}, want: 19102},
		{name: "ControllerPortOfLastNodeBusy", busy: []int{19097}, want: 19102},
		{name: "PostgresPortBusy", busy: []int{15432}, want: 19102},
		{name: "ServicePortBusy", busy: []int{18183}, want: 19102},
		{name: "ClaimedByAnotherRun", claimed: []int{19092}, want: 19102},
		{name: "FirstTwoUnusable", busy: []int{19096}, claimed: []int{19102}, want: 19112},
		{name: "NoneLeft", busy: []int{19092, 15433}, claimed: []int{19112},
			wantErr: "kafka 19092: busy 19092; kafka 19102: busy 15433; kafka 19112: claimed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := map[int]bool{}
			free := func(p int) bool { return !slices.Contains(tt.busy, p) }
			claim := func(c Ports) (func(), bool) {
				if slices.Contains(tt.claimed, c.Kafka) || held[c.Kafka] {
					return nil, false
				}
				held[c.Kafka] = true
				return func() { delete(held, c.Kafka) }, true
			}
			got, release, err := choosePorts(cands, 3, free, claim)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if len(held) != 0 {
					t.Fatalf("claims not given back: %v", held)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kafka != tt.want {
				t.Fatalf("chose kafka %d, want %d", got.Kafka, tt.want)
			}
			if len(held) != 1 || !held[got.Kafka] {
				t.Fatalf("claims held %v, want only the chosen %d", held, got.Kafka)
			}
			release()
		})
	}
}

// TestFreePortsSkipsABusyPort holds a port of the first slot the way
// another run's broker would and checks that FreePorts avoids it.
func TestFreePortsSkipsABusyPort(t *testing.T) {
	p, release, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.Kafka+3))
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer l.Close()
	release()
	q, release2, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if q == p {
		t.Fatalf("FreePorts chose %+v again although %d is busy", q, p.Kafka+3)
	}
	// A slot claimed by this process is not chosen twice either.
	r, release3, err := FreePorts(3)
	if err == nil {
		defer release3()
		if r == q {
			t.Fatalf("FreePorts chose the claimed %+v twice", r)
		}
	}
}
