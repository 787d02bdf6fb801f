package pg_test

import (
	"testing"
	"time"

	"github.com/choreo-saga/choreo/pkg/pg"
)

func TestInUTCKeepsTheInstantAndSkipsNil(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*60*60)
	created, ended := time.Date(2026, 1, 2, 3, 4, 5, 0, tokyo), time.Date(2026, 1, 2, 9, 0, 0, 0, tokyo)
	c, e := created, ended
	pg.InUTC(&c, &e, nil)
	for _, tt := range []struct{ got, was time.Time }{{c, created}, {e, ended}} {
		if tt.got.Location() != time.UTC || !tt.got.Equal(tt.was) {
			t.Errorf("InUTC(%v) = %v, want the same instant in UTC", tt.was, tt.got)
		}
	}
}
