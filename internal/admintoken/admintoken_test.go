package admintoken_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/choreo-saga/choreo/internal/admintoken"
)

func TestPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"Override", map[string]string{admintoken.EnvFile: "/run/t", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/run/t"},
		{"XDGCache", map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/choreo/admin-token"},
		{"Home", map[string]string{"HOME": "/h"}, "/h/.cache/choreo/admin-token"},
		{"Nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := admintoken.Path(func(k string) string { return tt.env[k] })
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Fatalf("Path = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestWriteRead: a generated token is long and random, stored for its
// owner alone, and read back as it was.
func TestWriteRead(t *testing.T) {
	a, err := admintoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := admintoken.Generate()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(a) || a == b {
		t.Fatalf("tokens %q and %q, want two different ones of 64 hex digits", a, b)
	}
	path := filepath.Join(t.TempDir(), "new", "admin-token")
	if _, err := admintoken.Read(path); !admintoken.ErrNotExist(err) {
		t.Fatalf("Read of no file = %v, want not exist", err)
	}
	for _, tok := range []string{a, b} { // the second replaces the first
		if err := admintoken.Write(path, tok); err != nil {
			t.Fatal(err)
		}
		if got, err := admintoken.Read(path); err != nil || got != tok {
			t.Fatalf("Read = %q, %v; want %q", got, err, tok)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (err %v), want 0600", fi.Mode().Perm(), err)
	}
}
