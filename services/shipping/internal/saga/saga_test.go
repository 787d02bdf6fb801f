package saga_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/services/shipping/internal/saga"
)

// Shipping reacts to reservations only; idem.Handler acknowledges the other
// inventory events because they have no route.
func TestRoutesReactOnlyToReservations(t *testing.T) {
	got := slices.Sorted(maps.Keys(saga.Routes(time.Now, nil)))
	if want := []string{events.TypeInventoryReserved}; !slices.Equal(got, want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}
	if want := []string{events.TopicInventory}; !slices.Equal(saga.Topics, want) {
		t.Fatalf("Topics = %v, want %v", saga.Topics, want)
	}
}
