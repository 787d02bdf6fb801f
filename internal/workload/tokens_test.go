package workload_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/workload"
	"github.com/choreo-saga/choreo/pkg/bearer"
)

// TestTokensAreEachCallersOwn: the services take the operator's token as
// an operator's and each customer's as that customer's, not an operator's;
// a customer not of the world has none.
func TestTokensAreEachCallersOwn(t *testing.T) {
	key, err := devkey.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := workload.NewWorld("t", 2, 1)
	tokens, err := workload.NewTokens(key, "load", w, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v, err := bearer.New(t.Context(), key.Auth(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		want  bearer.Caller
	}{
		{"Operator", tokens.Operator, bearer.Caller{Subject: "load", Operator: true}},
		{"Rich", tokens.Customer(w.Rich[1]), bearer.Caller{Subject: w.Rich[1]}},
		{"Poor", tokens.Customer(w.Poor[0]), bearer.Caller{Subject: w.Poor[0]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(t.Context(), tt.token)
			if err != nil || got != tt.want {
				t.Errorf("Verify = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if tok := tokens.Customer("stranger"); tok != "" {
		t.Errorf("a stranger's token = %q, want none", tok)
	}
}
