package infra

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestDiscoverUnderCI: with CI=true, Discover takes the environment's
// endpoints or refuses; it never falls back to Docker or the embedded
// broker, even when some of the endpoints are announced.
func TestDiscoverUnderCI(t *testing.T) {
	all := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1"}
	for _, name := range Databases {
		all[strings.ToUpper(name)+"_DATABASE_URL"] = "postgres://127.0.0.1:1/" + DatabaseName(name)
	}
	tests := []struct {
		name   string
		unset  []string // of all, announced but for these
		refuse bool
	}{
		{name: "NothingAnnouncedIsRefused", unset: keys(all), refuse: true},
		{name: "ADatabaseMissingIsRefused", unset: []string{"PAYMENT_DATABASE_URL"}, refuse: true},
		{name: "NoBrokersIsRefused", unset: []string{"KAFKA_BROKERS"}, refuse: true},
		{name: "EverythingAnnouncedIsUsed", refuse: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", "true")
			for k, v := range all {
				t.Setenv(k, v)
			}
			for _, k := range tt.unset {
				t.Setenv(k, "") // FromEnv reads "" as not announced
			}
			// A fallback would start containers or processes, which takes
			// far longer than a refusal.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := Discover(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if r != nil && r.Stop != nil {
				defer r.Stop(context.Background())
			}
			if tt.refuse {
				if err == nil || !strings.Contains(err.Error(), "CI=true requires") {
					t.Fatalf("Discover = %+v, %v; want the CI=true refusal", r, err)
				}
				return
			}
			if err != nil || r.Mode != ModeEnvironment || strings.Join(r.Brokers(), ",") != all["KAFKA_BROKERS"] {
				t.Fatalf("Discover = %+v, %v; want the environment's endpoints", r, err)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
