package participant

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameThePathThatRuns: the README, the pattern pages and the
// package doc name the consumer's path as it is built, the chain's steps
// (Spec.chain) and then transact's numbered steps, read from its source.
// A step added, removed or renamed in the code fails here until the docs
// say so.
func TestDocsNameThePathThatRuns(t *testing.T) {
	var chain []string
	for _, st := range (Spec{Name: "s"}).chain(slog.New(slog.DiscardHandler)) {
		chain = append(chain, st.name)
	}
	src, err := os.ReadFile("transaction.go")
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, m := range regexp.MustCompile(`(?m)^\t// (\d)\. (\w+)$`).FindAllStringSubmatch(string(src), -1) {
		steps = append(steps, m[2])
	}
	if len(steps) != 5 {
		t.Fatalf("transact's steps read from transaction.go = %v, want its five numbered step comments", steps)
	}
	wantChain, wantSteps := strings.Join(chain, " → "), strings.Join(steps, " → ")
	for _, path := range []string{"participant.go", "../../README.md", "../../docs/idempotent-consumer.md", "../../docs/kafka-consumer-semantics.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Comments and Markdown wrap lines: compare the words alone.
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", "")), " ")
		for _, want := range []string{wantChain, wantSteps} {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not name the path that runs: no %q", path, want)
			}
		}
	}
}
