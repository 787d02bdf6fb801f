package shipping_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/services/shipping"
)

func TestConfigValidate(t *testing.T) {
	valid := func() shipping.Config {
		cfg := shipping.DefaultConfig()
		cfg.DatabaseURL = "postgres://postgres@127.0.0.1:5432/shipping_db?sslmode=disable"
		cfg.KafkaBrokers = []string{"127.0.0.1:9092"}
		return cfg
	}
	tests := []struct {
		name    string
		change  func(*shipping.Config)
		wantVar string // "" means valid
	}{
		{"DefaultsAreValid", func(*shipping.Config) {}, ""},
		{"LowerCaseSpacedCountriesAreValid", func(c *shipping.Config) { c.ServedCountries = " jp, us " }, ""},
		{"SingleCountryIsValid", func(c *shipping.Config) { c.ServedCountries = "GB" }, ""},
		{"DatabaseURLWithWrongSchemeFails", func(c *shipping.Config) { c.DatabaseURL = "mysql://h/db" }, "DATABASE_URL"},
		{"DatabaseURLWithoutDatabaseFails", func(c *shipping.Config) { c.DatabaseURL = "postgres://127.0.0.1:5432" }, "DATABASE_URL"},
		{"EmptyDatabaseURLFails", func(c *shipping.Config) { c.DatabaseURL = "" }, "DATABASE_URL"},
		{"NoKafkaBrokersFails", func(c *shipping.Config) { c.KafkaBrokers = nil }, "KAFKA_BROKERS"},
		{"KafkaBrokerWithoutPortFails", func(c *shipping.Config) { c.KafkaBrokers = []string{"localhost"} }, "KAFKA_BROKERS"},
		{"EmptyHTTPAddrFails", func(c *shipping.Config) { c.HTTPAddr = "" }, "HTTP_ADDR"},
		{"ThreeLetterCountryFails", func(c *shipping.Config) { c.ServedCountries = "JPN" }, "SHIPPING_SERVED_COUNTRIES"},
		{"DigitInCountryFails", func(c *shipping.Config) { c.ServedCountries = "J1" }, "SHIPPING_SERVED_COUNTRIES"},
		{"OneBadAmongGoodFails", func(c *shipping.Config) { c.ServedCountries = "JP,USA,GB" }, "SHIPPING_SERVED_COUNTRIES"},
		{"EmptyListFails", func(c *shipping.Config) { c.ServedCountries = "" }, "SHIPPING_SERVED_COUNTRIES"},
		{"EmptyEntryFails", func(c *shipping.Config) { c.ServedCountries = "JP,,US" }, "SHIPPING_SERVED_COUNTRIES"},
		{"NonASCIILetterFails", func(c *shipping.Config) { c.ServedCountries = "ıt" }, "SHIPPING_SERVED_COUNTRIES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantVar == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantVar != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error naming %s", tt.wantVar)
			case tt.wantVar != "" && !strings.HasPrefix(err.Error(), tt.wantVar+":"):
				t.Fatalf("Validate() = %q, want it to name %s", err, tt.wantVar)
			}
		})
	}
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
	unset := func(key string) {
		t.Setenv(key, "") // restores the old value after the test
		os.Unsetenv(key)
	}
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/shipping_db?sslmode=disable")
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:9092")
	unset("HTTP_ADDR")

	t.Run("Defaults", func(t *testing.T) {
		unset("SHIPPING_SERVED_COUNTRIES")
		cfg := shipping.DefaultConfig()
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatalf("Process: %v", err)
		}
		if cfg.HTTPAddr != ":8083" || cfg.ServedCountries != "JP,US,GB,DE,FR" {
			t.Fatalf("defaults = %q, %q; want :8083, JP,US,GB,DE,FR", cfg.HTTPAddr, cfg.ServedCountries)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("ServedCountriesAreParsed", func(t *testing.T) {
		t.Setenv("SHIPPING_SERVED_COUNTRIES", " jp, us ")
		cfg := shipping.DefaultConfig()
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatalf("Process: %v", err)
		}
		served, err := cfg.Served()
		if err != nil {
			t.Fatalf("Served: %v", err)
		}
		if got := slices.Sorted(maps.Keys(served)); !slices.Equal(got, []string{"JP", "US"}) {
			t.Fatalf("Served() = %v, want [JP US]", got)
		}
	})
}
