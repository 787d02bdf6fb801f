package infra

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestShRefusesToRunOnAFake runs scripts/test.sh in a copy of the
// repository's scripts whose infra.sh, go, chromium, chaos.sh and
// scram-restart-check.sh are stand-ins: when infra.sh fails no test runs, and a package that reports
// a fake broker fails the run after printing what each package used.
func TestTestShRefusesToRunOnAFake(t *testing.T) {
	script, err := infraScript()
	if err != nil {
		t.Fatal(err)
	}
	testSh, err := os.ReadFile(filepath.Join(filepath.Dir(script), "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	const announce = `echo "export KAFKA_BROKERS=127.0.0.1:9092"`
	tests := []struct {
		name     string
		infraSh  string // the body of the stand-in scripts/infra.sh
		reported Mode   // the mode the stand-in go test reports
		wantOK   bool
		wantTest bool   // whether go test ran
		wantOut  string // in the combined output
	}{
		{name: "InfraFailingRunsNoTest", infraSh: "exit 1", reported: ModeEnvironment, wantOut: "infra.sh up failed"},
		{name: "AFakeBrokerFailsTheRun", infraSh: announce, reported: ModeEmbedded, wantTest: true, wantOut: "pkg/x embedded kafka="},
		{name: "TheRealOnePasses", infraSh: announce, reported: ModeEnvironment, wantOK: true, wantTest: true, wantOut: "pkg/x environment kafka="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			ran := filepath.Join(root, "go-test-ran")
			write(t, filepath.Join(root, "scripts", "test.sh"), string(testSh))
			write(t, filepath.Join(root, "scripts", "infra.sh"), tt.infraSh+"\n")
			write(t, filepath.Join(root, "scripts", "chaos.sh"), "exit 0\n")
			write(t, filepath.Join(root, "scripts", "scram-restart-check.sh"), "exit 0\n")
			write(t, filepath.Join(root, "bench", "go.mod"), "module bench\n")
			write(t, filepath.Join(root, "bin", "chromium"), "#!/bin/sh\nexit 0\n")
			write(t, filepath.Join(root, "bin", "go"), `#!/bin/sh
case "$1" in
test) touch `+ran+`; echo "pkg/x `+string(tt.reported)+` kafka=127.0.0.1:9092 postgresql=127.0.0.1:5432/choreo_test" >>"$CHOREO_TESTENV_REPORT" ;;
esac
exit 0
`)
			cmd := exec.Command("bash", filepath.Join(root, "scripts", "test.sh"))
			cmd.Env = append(os.Environ(), "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if (err == nil) != tt.wantOK {
				t.Errorf("test.sh: %v, want ok %v\n%s", err, tt.wantOK, out)
			}
			if _, err := os.Stat(ran); (err == nil) != tt.wantTest {
				t.Errorf("go test ran: %v, want %v\n%s", err == nil, tt.wantTest, out)
			}
			if !strings.Contains(string(out), tt.wantOut) {
				t.Errorf("output does not say %q:\n%s", tt.wantOut, out)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}
