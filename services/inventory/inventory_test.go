package inventory_test

import (
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/services/inventory"
)

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/inventory_db?sslmode=disable")
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:9092")
	// A token key, without which no service starts.
	t.Setenv("AUTH_PUBLIC_KEY_FILE", "/run/keys/token.pem")
	t.Setenv("AUTH_ISSUER", "https://idp.example")
	t.Setenv("AUTH_AUDIENCE", "choreo")
	t.Setenv("KAFKA_USERNAME", "svc")
	t.Setenv("KAFKA_PASSWORD", "pw")
	t.Setenv("KAFKA_PASSWORD_FILE", "")

	t.Run("Defaults", func(t *testing.T) {
		testenv.Unsetenv(t, "HTTP_ADDR")
		cfg := testenv.FromEnv(t, inventory.DefaultConfig())
		if cfg.HTTPAddr != ":8082" {
			t.Fatalf("HTTPAddr = %q, want :8082", cfg.HTTPAddr)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("EnvironmentOverridesDefaults", func(t *testing.T) {
		t.Setenv("HTTP_ADDR", ":9082")
		cfg := testenv.FromEnv(t, inventory.DefaultConfig())
		if cfg.HTTPAddr != ":9082" || cfg.Kafka.Brokers[0] != "127.0.0.1:9092" {
			t.Fatalf("config = %+v, want HTTP_ADDR and KAFKA_BROKERS from the environment", cfg)
		}
	})
	t.Run("BadSettingIsNamed", func(t *testing.T) {
		t.Setenv("KAFKA_BROKERS", "localhost")
		cfg := testenv.FromEnv(t, inventory.DefaultConfig())
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "KAFKA_BROKERS:") {
			t.Fatalf("Validate() = %v, want an error naming KAFKA_BROKERS", err)
		}
	})
	t.Run("NoTokenKeyRefused", func(t *testing.T) {
		testenv.Unsetenv(t, "AUTH_PUBLIC_KEY_FILE")
		testenv.Unsetenv(t, "AUTH_JWKS_URL")
		testenv.Unsetenv(t, "AUTH_DISABLED")
		cfg := testenv.FromEnv(t, inventory.DefaultConfig())
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "AUTH_PUBLIC_KEY_FILE:") {
			t.Fatalf("Validate() = %v, want an error naming AUTH_PUBLIC_KEY_FILE", err)
		}
	})
	t.Run("AuthDisabledIsRead", func(t *testing.T) {
		testenv.Unsetenv(t, "AUTH_PUBLIC_KEY_FILE")
		t.Setenv("AUTH_DISABLED", "true")
		cfg := testenv.FromEnv(t, inventory.DefaultConfig())
		if err := cfg.Validate(); err != nil || !cfg.Auth.Disabled {
			t.Fatalf("Validate() = %v, Disabled = %v; want nil, true", err, cfg.Auth.Disabled)
		}
	})
}
