package workload_test

import (
	"reflect"
	"testing"

	"github.com/choreo-saga/choreo/internal/workload"
)

func TestPlanIsSeeded(t *testing.T) {
	w := workload.NewWorld("t", 5, 5)
	a := workload.Plan(7, "t", 200, w, workload.DefaultMix)
	b := workload.Plan(7, "t", 200, w, workload.DefaultMix)
	c := workload.Plan(8, "t", 200, w, workload.DefaultMix)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of one seed differ")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("plans of seeds 7 and 8 are equal")
	}
}

// TestPlanBuildsEachKindToItsOutcome: each kind is built so that it can
// only end one way, and the mix's shares are roughly kept.
func TestPlanBuildsEachKindToItsOutcome(t *testing.T) {
	w := workload.NewWorld("t", 10, 20)
	mix := workload.Mix{Declined: 10, OutOfStock: 20, Unserved: 30}
	orders := workload.Plan(1, "t", 5000, w, mix)
	count := map[workload.Kind]int{}
	for _, o := range orders {
		count[o.Kind]++
		rich := w.Balance[o.Customer] == workload.RichBalance
		var empty bool
		for _, it := range o.Items {
			empty = empty || w.Stock[it.SKU] == 0
		}
		servedCountry := map[string]bool{"JP": true, "US": true, "GB": true, "DE": true, "FR": true}[o.Country]
		want := map[workload.Kind][3]bool{ // rich, an empty SKU, a served country
			workload.Happy:      {true, false, true},
			workload.Declined:   {false, false, true},
			workload.OutOfStock: {true, true, true},
			workload.Unserved:   {true, false, false},
		}[o.Kind]
		if got := [3]bool{rich, empty, servedCountry}; got != want {
			t.Fatalf("%s order %+v: rich, empty SKU, served = %v, want %v", o.Kind, o, got, want)
		}
	}
	for kind, share := range map[workload.Kind]int{workload.Declined: 10, workload.OutOfStock: 20, workload.Unserved: 30, workload.Happy: 40} {
		if got := count[kind] * 100 / len(orders); got < share-3 || got > share+3 {
			t.Errorf("%s: %d%% of orders, want about %d%%", kind, got, share)
		}
	}
}

func TestHotKeyWorldHasOneOfEach(t *testing.T) {
	w := workload.NewWorld("t", 1, 1)
	if len(w.Rich) != 1 || len(w.Stocked) != 1 {
		t.Fatalf("world(1,1) = %d rich customers, %d stocked SKUs; want 1 and 1", len(w.Rich), len(w.Stocked))
	}
	for _, o := range workload.Plan(3, "t", 100, w, workload.Mix{}) {
		if o.Kind != workload.Happy || o.Customer != w.Rich[0] || o.Items[0].SKU != w.Stocked[0] || len(o.Items) != 1 {
			t.Fatalf("order %+v of a hot-key plan with no compensations, want one line of the one SKU for the one customer", o)
		}
	}
}

func TestMixValidate(t *testing.T) {
	for _, tt := range []struct {
		mix workload.Mix
		ok  bool
	}{
		{workload.DefaultMix, true},
		{workload.Mix{}, true},
		{workload.Mix{Declined: 50, OutOfStock: 50}, true},
		{workload.Mix{Declined: 50, OutOfStock: 51}, false},
		{workload.Mix{Unserved: -1}, false},
	} {
		if err := tt.mix.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v.Validate() = %v, want ok %v", tt.mix, err, tt.ok)
		}
	}
}

func TestParseMix(t *testing.T) {
	tests := []struct {
		in   string
		want workload.Mix
		ok   bool
	}{
		{"default", workload.DefaultMix, true},
		{"", workload.Mix{}, true},
		{"declined=10, unserved=5", workload.Mix{Declined: 10, Unserved: 5}, true},
		{"out-of-stock=100", workload.Mix{OutOfStock: 100}, true},
		{"declined=60,unserved=60", workload.Mix{}, false},
		{"teleported=1", workload.Mix{}, false},
		{"declined", workload.Mix{}, false},
	}
	for _, tt := range tests {
		got, err := workload.ParseMix(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseMix(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
