package participant

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
)

func TestConfigureReadsTheEnvironmentOverTheDefaults(t *testing.T) {
	type serviceConfig struct {
		Config
		Own string `envconfig:"TEST_OWN_SETTING"`
	}
	unset(t, "HTTP_ADDR", "KAFKA_PARTITIONS")
	t.Setenv("DATABASE_URL", "postgres://u@db:5432/svc")
	t.Setenv("KAFKA_BROKERS", "k1:9092,k2:9092")
	t.Setenv("TEST_OWN_SETTING", "mine")
	var got serviceConfig
	err := configure(context.Background(), serviceConfig{Config: DefaultConfig(":8089")}, func(_ context.Context, c serviceConfig) error {
		got = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTPAddr != ":8089" || got.DatabaseURL != "postgres://u@db:5432/svc" ||
		!slices.Equal(got.KafkaBrokers, []string{"k1:9092", "k2:9092"}) || got.Own != "mine" {
		t.Errorf("config = %+v; want the default HTTP address and the environment's settings", got)
	}
	if got.Partitions != DefaultConfig("").Partitions {
		t.Errorf("partitions = %d, want the default %d", got.Partitions, DefaultConfig("").Partitions)
	}
}

func TestConfigureRefusesAMissingRequiredSettingWithoutRunning(t *testing.T) {
	unset(t, "DATABASE_URL", "KAFKA_BROKERS")
	ran := false
	err := configure(context.Background(), DefaultConfig(":8089"), func(context.Context, Config) error {
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
	if err := configure(context.Background(), DefaultConfig(":8089"), func(context.Context, Config) error { return boom }); !errors.Is(err, boom) {
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
