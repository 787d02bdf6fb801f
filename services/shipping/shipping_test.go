package shipping_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/shipping"
)

func TestConfigValidate(t *testing.T) {
	valid := func() shipping.Config {
		cfg := shipping.DefaultConfig()
		cfg.DatabaseURL = "postgres://postgres@127.0.0.1:5432/shipping_db?sslmode=disable"
		cfg.KafkaBrokers = []string{"127.0.0.1:9092"}
		return cfg
	}
	testenv.CheckValidate(t, valid, []testenv.ConfigCase[shipping.Config]{
		{Name: "DefaultsAreValid", Change: func(*shipping.Config) {}, WantVar: ""},
		{Name: "LowerCaseSpacedCountriesAreValid", Change: func(c *shipping.Config) { c.ServedCountries = " jp, us " }, WantVar: ""},
		{Name: "SingleCountryIsValid", Change: func(c *shipping.Config) { c.ServedCountries = "GB" }, WantVar: ""},
		{Name: "DatabaseURLWithWrongSchemeFails", Change: func(c *shipping.Config) { c.DatabaseURL = "mysql://h/db" }, WantVar: "DATABASE_URL"},
		{Name: "DatabaseURLWithoutDatabaseFails", Change: func(c *shipping.Config) { c.DatabaseURL = "postgres://127.0.0.1:5432" }, WantVar: "DATABASE_URL"},
		{Name: "EmptyDatabaseURLFails", Change: func(c *shipping.Config) { c.DatabaseURL = "" }, WantVar: "DATABASE_URL"},
		{Name: "NoKafkaBrokersFails", Change: func(c *shipping.Config) { c.KafkaBrokers = nil }, WantVar: "KAFKA_BROKERS"},
		{Name: "KafkaBrokerWithoutPortFails", Change: func(c *shipping.Config) { c.KafkaBrokers = []string{"localhost"} }, WantVar: "KAFKA_BROKERS"},
		{Name: "EmptyHTTPAddrFails", Change: func(c *shipping.Config) { c.HTTPAddr = "" }, WantVar: "HTTP_ADDR"},
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
}
