package shipping_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/shipping"
)

// TestConfigValidate checks the runtime's settings and the served
// countries, each bad entry named by SHIPPING_SERVED_COUNTRIES.
func TestConfigValidate(t *testing.T) {
	runtime := func(c *shipping.Config) *participant.Config { return &c.Config }
	testenv.CheckServiceConfig(t, shipping.DefaultConfig(), runtime, []testenv.ConfigCase[shipping.Config]{
		{Name: "LowerCaseSpacedCountriesAreValid", Change: func(c *shipping.Config) { c.ServedCountries = " jp, us " }, WantVar: ""},
		{Name: "SingleCountryIsValid", Change: func(c *shipping.Config) { c.ServedCountries = "GB" }, WantVar: ""},
		{Name: "ThreeLetterCountryFails", Change: func(c *shipping.Config) { c.ServedCountries = "JPN" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
		{Name: "DigitInCountryFails", Change: func(c *shipping.Config) { c.ServedCountries = "J1" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
		{Name: "OneBadAmongGoodFails", Change: func(c *shipping.Config) { c.ServedCountries = "JP,USA,GB" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
		{Name: "EmptyListFails", Change: func(c *shipping.Config) { c.ServedCountries = "" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
		{Name: "EmptyEntryFails", Change: func(c *shipping.Config) { c.ServedCountries = "JP,,US" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
		{Name: "NonASCIILetterFails", Change: func(c *shipping.Config) { c.ServedCountries = "ıt" }, WantVar: "SHIPPING_SERVED_COUNTRIES"},
	})
}

func TestConfigServed(t *testing.T) {
	tests := []struct {
		name string
		list string
		want []string
	}{
		{"DefaultList", "JP,US,GB,DE,FR", []string{"DE", "FR", "GB", "JP", "US"}},
		{"TrimsAndUpperCases", " jp, us ", []string{"JP", "US"}},
		{"MixedCase", "Jp,uS", []string{"JP", "US"}},
		{"DuplicatesCollapse", "JP,jp", []string{"JP"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served, err := shipping.Config{ServedCountries: tt.list}.Served()
			if err != nil {
				t.Fatalf("Served() error: %v", err)
			}
			if got := slices.Sorted(maps.Keys(served)); !slices.Equal(got, tt.want) {
				t.Fatalf("Served() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/shipping_db?sslmode=disable")
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:9092")
	// A token key, without which no service starts.
	t.Setenv("AUTH_PUBLIC_KEY_FILE", "/run/keys/token.pem")
	t.Setenv("AUTH_ISSUER", "https://idp.example")
	t.Setenv("AUTH_AUDIENCE", "choreo")
	t.Setenv("KAFKA_USERNAME", "svc")
	t.Setenv("KAFKA_PASSWORD", "pw")
	t.Setenv("KAFKA_PASSWORD_FILE", "")
	testenv.Unsetenv(t, "HTTP_ADDR")

	t.Run("Defaults", func(t *testing.T) {
		testenv.Unsetenv(t, "SHIPPING_SERVED_COUNTRIES")
		cfg := testenv.FromEnv(t, shipping.DefaultConfig())
		if cfg.HTTPAddr != ":8083" || cfg.ServedCountries != "JP,US,GB,DE,FR" {
			t.Fatalf("defaults = %q, %q; want :8083, JP,US,GB,DE,FR", cfg.HTTPAddr, cfg.ServedCountries)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("ServedCountriesAreParsed", func(t *testing.T) {
		t.Setenv("SHIPPING_SERVED_COUNTRIES", " jp, us ")
		cfg := testenv.FromEnv(t, shipping.DefaultConfig())
		served, err := cfg.Served()
		if err != nil {
			t.Fatalf("Served: %v", err)
		}
		if got := slices.Sorted(maps.Keys(served)); !slices.Equal(got, []string{"JP", "US"}) {
			t.Fatalf("Served() = %v, want [JP US]", got)
		}
	})
	t.Run("NoTokenKeyRefused", func(t *testing.T) {
		testenv.Unsetenv(t, "AUTH_PUBLIC_KEY_FILE")
		testenv.Unsetenv(t, "AUTH_JWKS_URL")
		testenv.Unsetenv(t, "AUTH_DISABLED")
		cfg := testenv.FromEnv(t, shipping.DefaultConfig())
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "AUTH_PUBLIC_KEY_FILE:") {
			t.Fatalf("Validate() = %v, want an error naming AUTH_PUBLIC_KEY_FILE", err)
		}
	})
	t.Run("AuthDisabledIsRead", func(t *testing.T) {
		testenv.Unsetenv(t, "AUTH_PUBLIC_KEY_FILE")
		t.Setenv("AUTH_DISABLED", "true")
		cfg := testenv.FromEnv(t, shipping.DefaultConfig())
		if err := cfg.Validate(); err != nil || !cfg.Auth.Disabled {
			t.Fatalf("Validate() = %v, Disabled = %v; want nil, true", err, cfg.Auth.Disabled)
		}
	})
}
