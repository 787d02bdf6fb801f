package testenv

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/choreo-saga/choreo/internal/infra"
)

// ReportEnv names the file Report appends to. scripts/test.sh sets it and
// prints the file after the run: go test shows a passing package's stderr
// only under -v, so without it nobody would see which packages ran on a fake.
const ReportEnv = "CHOREO_TESTENV_REPORT"

// Report appends one line to the file named by $CHOREO_TESTENV_REPORT, if
// set, saying which infrastructure the test binary in the working directory
// used:
//
//	services/tracker environment kafka=127.0.0.1:9092 postgresql=127.0.0.1:5432/choreo_test
//
// Packages run in parallel; each line is one append-mode write, which
// Linux does not interleave with another's.
func Report(r *infra.Running) error {
	path := os.Getenv(ReportEnv)
	if path == "" {
		return nil
	}
	pkg, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if root, err := moduleRoot(pkg); err == nil {
		if rel, err := filepath.Rel(root, pkg); err == nil {
			pkg = filepath.ToSlash(rel)
		}
	}
	pgAddr := "?"
	if u, err := url.Parse(r.DatabaseURLs["test"]); err == nil {
		pgAddr = u.Host + u.Path // never the password
	}
	line := fmt.Sprintf("%s %s kafka=%s postgresql=%s\n", pkg, r.Mode, strings.Join(r.Brokers(), ","), pgAddr)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("report: %w", err)
	}
	return f.Close()
}

// moduleRoot returns the nearest directory at or above dir holding go.mod.
func moduleRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}
