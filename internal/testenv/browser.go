package testenv

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// browserBound is how long DumpDOM tries. Chromium's first start on a fresh
// HOME sets up its profile and can take tens of seconds on a loaded machine.
const browserBound = 2 * time.Minute

// DumpDOM loads url in headless Chromium (Debian's chromium package), lets
// its scripts run, and returns the DOM they leave — what a person would
// see, for a test to check — once it contains loaded, the mark the page sets
// when it has drawn (the tracker's page: data-loaded="true"). A dump
// without it (a slow first start, a page still fetching) is taken again in
// a fresh profile, up to browserBound. Without Chromium the test fails and
// says how to install it (scripts/test.sh does).
func DumpDOM(t testing.TB, url, loaded string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("headless Chromium is needed to test the page: apt-get install -y chromium (scripts/test.sh installs it): %v", err)
	}
	home := t.TempDir()
	deadline := time.Now().Add(browserBound)
	for attempt := 1; ; attempt++ {
		dom, stderr, err := dumpOnce(bin, url, home, t.TempDir(), time.Until(deadline))
		if err == nil && strings.Contains(dom, loaded) {
			return dom
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromium --dump-dom %s: no %s after %d attempts in %v (last: %v)\nstderr:\n%s\nDOM:\n%s",
				url, loaded, attempt, browserBound, err, stderr, dom)
		}
		if err != nil { // a Chromium that fails at once is not run in a tight loop
			time.Sleep(min(time.Duration(attempt)*200*time.Millisecond, 2*time.Second))
		}
	}
}

// dumpOnce runs Chromium once with a new, empty profile in dataDir. The
// flags keep it off the network it would otherwise call home to, out of
// its first-run setup, and out of the sandbox root cannot use.
func dumpOnce(bin, url, home, dataDir string, bound time.Duration) (dom, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(bound, time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+dataDir, "--dump-dom", "--virtual-time-budget=5000", url)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	return string(out), errOut.String(), err
}
