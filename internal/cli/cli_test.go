package cli_test

import (
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
