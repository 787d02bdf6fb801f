package main

import (
	"slices"
	"testing"

	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
)

// TestReactionsAreTheServices: the suite's copy of who reacts to what is
// the services' own, so the duplicates it wants of a pass are the ones
// the consumers can count.
func TestReactionsAreTheServices(t *testing.T) {
	specs := map[string]func() (participant.Spec, error){
		"order":     func() (participant.Spec, error) { return order.Spec(order.DefaultConfig()) },
		"payment":   func() (participant.Spec, error) { return payment.Spec(payment.DefaultConfig()) },
		"inventory": func() (participant.Spec, error) { return inventory.Spec(inventory.DefaultConfig()) },
		"shipping":  func() (participant.Spec, error) { return shipping.Spec(shipping.DefaultConfig()) },
	}
	for _, s := range Services {
		spec, err := specs[s]()
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, r := range spec.Reactions {
			types = append(types, r.EventType())
		}
		slices.Sort(types)
		want := slices.Sorted(slices.Values(Reactions[s]))
		if spec.Name != s || !slices.Equal(types, want) {
			t.Errorf("%s (group %q) reacts to %v; Reactions says %v", s, spec.Name, types, want)
		}
		if got := Consumes(s); !slices.Equal(got, slices.Sorted(slices.Values(spec.Consumes()))) {
			t.Errorf("%s consumes %v; Consumes says %v", s, spec.Consumes(), got)
		}
	}
}
