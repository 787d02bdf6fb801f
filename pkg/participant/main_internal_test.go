package participant

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

func TestConfigureReadsTheEnvironmentOverTheDefaults(t *testing.T) {
	type serviceConfig struct {
		Config
		Own string `envconfig:"TEST_OWN_SETTING"`
	}
	unset(t, "HTTP_ADDR", "KAFKA_PARTITIONS")
	t.Setenv("DATABASE_URL", "postgres://u@db:5432/svc")
	t.Setenv("KAFKA_BROKERS", "k1:9092,k2:9092")
	t.Setenv("KAFKA_USERNAME", "svc")
	t.Setenv("KAFKA_PASSWORD_FILE", "/run/secrets/kafka")
	t.Setenv("TEST_OWN_SETTING", "mine")
	var got serviceConfig
	err := configure(context.Background(), "test", serviceConfig{Config: DefaultConfig(":8089")}, func(_ context.Context, c serviceConfig) error {
		got = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTPAddr != ":8089" || got.DatabaseURL != "postgres://u@db:5432/svc" ||
		!slices.Equal(got.Kafka.Brokers, []string{"k1:9092", "k2:9092"}) || got.Own != "mine" ||
		got.Kafka.Username != "svc" || got.Kafka.PasswordFile != "/run/secrets/kafka" {
		t.Errorf("config = %+v; want the default HTTP address and the environment's settings", got)
	}
	if got.Partitions != DefaultConfig("").Partitions {
		t.Errorf("partitions = %d, want the default %d", got.Partitions, DefaultConfig("").Partitions)
	}
}

func TestConfigureTrimsTheBrokerList(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
		wantErr     bool
	}{
		{"SpacesAfterCommas", "a:9092, b:9092 ,  c:9092", []string{"a:9092", "b:9092", "c:9092"}, false},
		{"One", " k1:9092 ", []string{"k1:9092"}, false},
		{"EmptyEntry", "a:9092,,b:9092", nil, true},
		{"TrailingComma", "a:9092,", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "postgres://u@db:5432/svc")
			t.Setenv("KAFKA_BROKERS", tt.value)
			t.Setenv("AUTH_PUBLIC_KEY_FILE", "/run/keys/token.pem")
			t.Setenv("AUTH_ISSUER", "https://idp.example")
			t.Setenv("AUTH_AUDIENCE", "choreo")
			t.Setenv("KAFKA_USERNAME", "svc")
			t.Setenv("KAFKA_PASSWORD", "pw")
			t.Setenv("KAFKA_PASSWORD_FILE", "")
			var got Config
			err := configure(context.Background(), "test", DefaultConfig(":8089"), func(_ context.Context, c Config) error {
				got = c
				return c.Validate()
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !slices.Equal(got.Kafka.Brokers, tt.want) {
				t.Errorf("brokers = %q, want %q", got.Kafka.Brokers, tt.want)
			}
		})
	}
}

func TestConfigureSetsTheLogLevel(t *testing.T) {
	t.Cleanup(func() { slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil))) })
	t.Setenv("DATABASE_URL", "postgres://u@db:5432/svc")
	t.Setenv("KAFKA_BROKERS", "k1:9092")
	tests := []struct {
		value     string
		wantDebug bool
		wantWarn  bool
		wantErr   bool
	}{
		{"", false, true, false}, // unset: INFO
		{"debug", true, true, false},
		{"ERROR", false, false, false},
		{"loud", false, false, true},
	}
	for _, tt := range tests {
		t.Run("LOG_LEVEL="+tt.value, func(t *testing.T) {
			if tt.value == "" {
				unset(t, "LOG_LEVEL")
			} else {
				t.Setenv("LOG_LEVEL", tt.value)
			}
			err := configure(context.Background(), "test", DefaultConfig(":8089"), func(ctx context.Context, _ Config) error {
				if got := slog.Default().Enabled(ctx, slog.LevelDebug); got != tt.wantDebug {
					t.Errorf("DEBUG enabled = %v, want %v", got, tt.wantDebug)
				}
				if got := slog.Default().Enabled(ctx, slog.LevelWarn); got != tt.wantWarn {
					t.Errorf("WARN enabled = %v, want %v", got, tt.wantWarn)
				}
				return nil
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestConfigureRefusesAMissingRequiredSettingWithoutRunning(t *testing.T) {
	unset(t, "DATABASE_URL", "KAFKA_BROKERS")
	ran := false
	err := configure(context.Background(), "test", DefaultConfig(":8089"), func(context.Context, Config) error {
		ran = true
		return nil
	})
	if err == nil || ran {
		t.Fatalf("err = %v, ran = %v; want a config error and no run", err, ran)
	}
}

func TestConfigureReturnsRunsError(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u@db:5432/svc")
	t.Setenv("KAFKA_BROKERS", "k1:9092")
	boom := errors.New("boom")
	if err := configure(context.Background(), "test", DefaultConfig(":8089"), func(context.Context, Config) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

// unset removes the variables for the test, restoring them after it.
func unset(t *testing.T, keys ...string) {
	for _, k := range keys {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// TestValidateOutboxRelay: OUTBOX_RELAY is builtin (also when unset) or
// debezium; anything else stops the service before it starts.
func TestValidateOutboxRelay(t *testing.T) {
	tests := []struct {
		relay string
		ok    bool
	}{
		{"", true}, {outbox.RelayBuiltin, true}, {outbox.RelayDebezium, true}, {"Debezium", false}, {"kafka-connect", false},
	}
	for _, tt := range tests {
		t.Run("OUTBOX_RELAY="+tt.relay, func(t *testing.T) {
			c := DefaultConfig(":0")
			c.DatabaseURL = "postgres://u@db:5432/svc"
			c.Kafka.Brokers = []string{"k1:9092"}
			c.Kafka.Username, c.Kafka.Password = "svc", "secret"
			c.Auth.Disabled = true // without a token key Validate fails whatever the relay
			c.OutboxRelay = tt.relay
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
