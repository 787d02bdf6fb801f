package infra

import (
	"context"
	"strings"
	"testing"
)

// TestStopKafkaOnlyStopsTheBrokerInUse: a shell that exported a private
// cluster's addresses but not its CHOREO_INFRA_DIR and KAFKA_PORT must not
// have the e2e suite stop the default cluster.
func TestStopKafkaOnlyStopsTheBrokerInUse(t *testing.T) {
	script, err := infraScript()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHOREO_INFRA_DIR", t.TempDir())
	t.Setenv("KAFKA_PORT", "61092")
	tests := []struct {
		name  string
		inUse []string
		ok    bool
	}{
		{"TheClusterInfraShManages", []string{"127.0.0.1:61092"}, true},
		{"AnotherCluster", []string{"127.0.0.1:9092"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sameBroker(context.Background(), script, tt.inUse)
			if (err == nil) != tt.ok {
				t.Fatalf("sameBroker(%v) = %v, want ok %v", tt.inUse, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "CHOREO_INFRA_DIR") {
				t.Errorf("error %q does not say what to export", err)
			}
		})
	}
}
