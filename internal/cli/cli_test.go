package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/choreo-saga/choreo/internal/cli"
)

func TestBrokers(t *testing.T) {
	tests := []struct {
		name, flag string
		want       []string
	}{
		{"EmptyIsLocal", "", []string{"127.0.0.1:9092"}},
		{"One", "kafka:9092", []string{"kafka:9092"}},
		{"Several", "a:9092,b:9092", []string{"a:9092", "b:9092"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cli.Brokers(tt.flag); !slices.Equal(got, tt.want) {
				t.Fatalf("Brokers(%q) = %q, want %q", tt.flag, got, tt.want)
			}
		})
	}
}

// TestKafkaTakesTheUserFromTheEnvironmentElseTheLocalAdmin: a tool logs in
// as the user the environment names; without one, as the local modes'
// administrator if they wrote its password down; else it refuses.
func TestKafkaTakesTheUserFromTheEnvironmentElseTheLocalAdmin(t *testing.T) {
	local := filepath.Join(t.TempDir(), "kafka-admin-password")
	if err := cli.WriteLocalAdmin(local, "pw"); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	tests := []struct {
		name             string
		env              map[string]string
		wantUser, wantPF string
		wantErr          bool
	}{
		{"EnvironmentUser", map[string]string{"KAFKA_USERNAME": "order", "KAFKA_PASSWORD_FILE": "/p", cli.LocalAdminFileEnv: local}, "order", "/p", false},
		{"LocalAdmin", map[string]string{cli.LocalAdminFileEnv: local}, cli.LocalAdmin, local, false},
		{"NoneIsRefused", map[string]string{cli.LocalAdminFileEnv: missing}, "", "", true},
		{"InsecureOptOut", map[string]string{"KAFKA_INSECURE": "true", cli.LocalAdminFileEnv: local}, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := cli.Kafka("", func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("Kafka = %+v, %v; want error %v", c, err, tt.wantErr)
			}
			if !tt.wantErr && (c.Username != tt.wantUser || c.PasswordFile != tt.wantPF) {
				t.Errorf("user %q password file %q, want %q %q", c.Username, c.PasswordFile, tt.wantUser, tt.wantPF)
			}
		})
	}
	if fi, err := os.Stat(local); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("local admin file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}
