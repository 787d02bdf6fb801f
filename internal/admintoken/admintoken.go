// Package admintoken keeps the admin token the local run modes generate
// where choreoctl finds it without being told.
package admintoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvFile names the variable that overrides the file's path.
const EnvFile = "CHOREO_ADMIN_TOKEN_FILE"

// Path is the token file: $CHOREO_ADMIN_TOKEN_FILE, else
// $XDG_CACHE_HOME/choreo/admin-token, else $HOME/.cache/choreo/admin-token.
// scripts/run.sh computes the same path.
func Path(getenv func(string) string) (string, error) {
	if p := getenv(EnvFile); p != "" {
		return p, nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "choreo", "admin-token"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "choreo", "admin-token"), nil
	}
	return "", fmt.Errorf("admin token file: set %s, XDG_CACHE_HOME or HOME", EnvFile)
}

// Generate returns a new token: 32 random bytes in hex. A token is
// generated at each start, never a fixed default, so the operator API is
// never open to whoever knows the code.
func Generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Write stores token at path, readable by its owner only, replacing the
// file whole so a reader never sees half a token.
func Write(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("admin token file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return fmt.Errorf("admin token file: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.WriteString(token + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("admin token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("admin token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("admin token file: %w", err)
	}
	return nil
}

// Read returns the token stored at path; an error wrapping os.ErrNotExist
// if there is none.
func Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("admin token file %s is empty", path)
	}
	return token, nil
}

// ErrNotExist reports whether err says there is no token file.
func ErrNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
