package inventory_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/services/inventory"
)

func TestConfigFromEnvironment(t *testing.T) {
	unset := func(key string) {
		t.Setenv(key, "") // restores the old value after the test
		os.Unsetenv(key)
	}
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/inventory_db?sslmode=disable")
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:9092")

	t.Run("Defaults", func(t *testing.T) {
		unset("HTTP_ADDR")
		cfg := inventory.DefaultConfig()
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatalf("Process: %v", err)
		}
		if cfg.HTTPAddr != ":8082" {
			t.Fatalf("HTTPAddr = %q, want :8082", cfg.HTTPAddr)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("EnvironmentOverridesDefaults", func(t *testing.T) {
		t.Setenv("HTTP_ADDR", ":9082")
		cfg := inventory.DefaultConfig()
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatalf("Process: %v", err)
		}
		if cfg.HTTPAddr != ":9082" || cfg.KafkaBrokers[0] != "127.0.0.1:9092" {
			t.Fatalf("config = %+v, want HTTP_ADDR and KAFKA_BROKERS from the environment", cfg)
		}
	})
	t.Run("BadSettingIsNamed", func(t *testing.T) {
		t.Setenv("KAFKA_BROKERS", "localhost")
		cfg := inventory.DefaultConfig()
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatalf("Process: %v", err)
		}
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "KAFKA_BROKERS:") {
			t.Fatalf("Validate() = %v, want an error naming KAFKA_BROKERS", err)
		}
	})
}
