package infra

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestDockerNoEngine checks the path every machine without Docker takes
// through Discover: Docker must say ErrNoDocker, and say it quickly.
func TestDockerNoEngine(t *testing.T) {
	// A port that was listening a moment ago and is closed now: connection
	// refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	tests := []struct {
		name       string
		dockerHost string
	}{
		{"missing unix socket", "unix://" + filepath.Join(t.TempDir(), "docker.sock")},
		{"nonexistent socket path", "unix:///nonexistent/docker.sock"},
		{"closed tcp port", "tcp://" + closed},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tt.dockerHost)
			start := time.Now()
			r, err := Docker(context.Background(), log)
			took := time.Since(start)
			if !errors.Is(err, ErrNoDocker) {
				t.Fatalf("Docker() = %v, %v; want ErrNoDocker", r, err)
			}
			if r != nil {
				t.Errorf("Docker() returned endpoints with ErrNoDocker: %+v", r)
			}
			if took > dockerProbeTimeout+500*time.Millisecond {
				t.Errorf("Docker() took %s to find no engine; want at most %s", took, dockerProbeTimeout)
			}
		})
	}
}

// TestDockerProbeTimesOut checks that an engine address that accepts
// connections but never answers costs at most dockerProbeTimeout.
func TestDockerProbeTimesOut(t *testing.T) {
	// A listener that accepts and then says nothing, like a hung daemon.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	t.Setenv("DOCKER_HOST", "tcp://"+l.Addr().String())
	start := time.Now()
	err = dockerAnswers(context.Background(), "tcp://"+l.Addr().String())
	took := time.Since(start)
	if err == nil {
		t.Fatal("dockerAnswers() = nil for a daemon that never answers")
	}
	if took > dockerProbeTimeout+500*time.Millisecond {
		t.Errorf("dockerAnswers() took %s; want at most %s", took, dockerProbeTimeout)
	}
}

func TestDockerDialHost(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()

	tests := []struct {
		dockerHost string
		wantErr    bool
	}{
		{"unix://" + sock, false},
		{"tcp://" + tl.Addr().String(), false},
		{"unix:///nonexistent/docker.sock", true},
		{"ssh://user@host", false}, // left to testcontainers
		{"npipe:////./pipe/docker_engine", false},
		{"://bad", true},
	}
	for _, tt := range tests {
		t.Run(tt.dockerHost, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := dialDockerHost(ctx, tt.dockerHost)
			if (err != nil) != tt.wantErr {
				t.Errorf("dialDockerHost(%q) = %v, wantErr %v", tt.dockerHost, err, tt.wantErr)
			}
		})
	}
}

func TestDockerDatabaseNames(t *testing.T) {
	want := map[string]string{
		"order":     "order_db",
		"payment":   "payment_db",
		"inventory": "inventory_db",
		"shipping":  "shipping_db",
		"tracker":   "tracker_db",
		"test":      "choreo_test",
	}
	for _, name := range Databases {
		if got := DatabaseName(name); got != want[name] {
			t.Errorf("DatabaseName(%q) = %q, want %q", name, got, want[name])
		}
	}
}

// TestDockerDiscoveryIsBounded runs testcontainers' own discovery (no
// DOCKER_HOST): wherever this runs, with an engine or without, the answer
// comes within dockerProbeTimeout.
func TestDockerDiscoveryIsBounded(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	start := time.Now()
	err := dockerAnswers(context.Background(), "")
	took := time.Since(start)
	t.Logf("dockerAnswers() = %v after %s", err, took)
	if took > dockerProbeTimeout+500*time.Millisecond {
		t.Errorf("dockerAnswers() took %s; want at most %s", took, dockerProbeTimeout)
	}
}
