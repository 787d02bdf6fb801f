package failpoint_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/choreo-saga/choreo/pkg/failpoint"
)

func TestEnable(t *testing.T) {
	tests := []struct {
		spec    string
		wantErr string
	}{
		{"", ""},
		{"after-commit", ""},
		{"after-commit=0.5, after-publish=0, between-batches=1", ""},
		{"after-commit=2", "probability"},
		{"after-commit=x", "probability"},
		{"after-commit=NaN", "probability"},
		{"before-lunch", "unknown point"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			err := failpoint.Enable(tt.spec)
			defer failpoint.Enable("") //nolint:errcheck
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Enable(%q) = %v, want error containing %q", tt.spec, err, tt.wantErr)
			}
		})
	}
}

// TestHitKillsTheProcess runs this test binary again as a child that arms
// a point and hits it: the child must die of SIGKILL, and an unarmed point
// must let it live.
func TestHitKillsTheProcess(t *testing.T) {
	if spec, ok := os.LookupEnv("FAILPOINT_CHILD"); ok {
		if err := failpoint.Enable(spec); err != nil {
			os.Exit(3)
		}
		failpoint.Hit(failpoint.AfterCommit)
		os.Exit(0)
	}
	for _, tt := range []struct {
		spec   string
		killed bool
	}{
		{"after-commit", true},
		{"after-publish", false},
		{"after-commit=0", false},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsTheProcess$")
			cmd.Env = append(os.Environ(), "FAILPOINT_CHILD="+tt.spec)
			err := cmd.Run()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL
			if killed != tt.killed {
				t.Fatalf("child killed = %v (err %v), want %v", killed, err, tt.killed)
			}
		})
	}
}
