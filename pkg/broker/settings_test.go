package broker_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryClientGoesThroughConn: a sarama configuration made anywhere but
// Settings would connect without the process's credentials. The example
// builds its own on purpose (it is plain sarama, to be copied) and logs in
// with authenticate.
func TestEveryClientGoesThroughConn(t *testing.T) {
	allowed := []string{"pkg/broker/broker.go", "examples/idempotent-consumer/consumer.go"}
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if strings.Contains(string(b), "sarama."+"NewConfig(") && !slices.Contains(allowed, filepath.ToSlash(rel)) {
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("sarama configurations made outside broker.Settings (use broker.Conn.Config): %v", found)
	}
}
