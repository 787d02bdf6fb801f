package testenv

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// DumpDOM loads url in headless Chromium (Debian's chromium package), lets
// its scripts run, and returns the DOM they leave — what a person would
// see, for a test to check. Without Chromium the test fails and says how
// to install it (scripts/test.sh does).
func DumpDOM(t testing.TB, url string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("headless Chromium is needed to test the page: apt-get install -y chromium (scripts/test.sh installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The flags keep Chromium off the network it would otherwise call
	// home to, and out of the sandbox root cannot use.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "--virtual-time-budget=5000", url)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}
