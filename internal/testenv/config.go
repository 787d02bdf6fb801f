package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
)

// ConfigCase is one change to a valid service Config and the setting its
// Validate must then name: "" when the Config is still valid.
type ConfigCase[C any] struct {
	Name    string
	Change  func(*C)
	WantVar string
}

// CheckValidate runs each case as a subtest on a fresh valid() Config and
// fails it unless Validate accepts the changed Config or, when the case
// wants a setting named, fails with an error that begins "SETTING:" — the
// environment variable an operator has to fix, first.
func CheckValidate[C interface{ Validate() error }](t *testing.T, valid func() C, cases []ConfigCase[C]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			cfg := valid()
			tt.Change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.WantVar == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.WantVar != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error naming %s", tt.WantVar)
			case tt.WantVar != "" && !strings.HasPrefix(err.Error(), tt.WantVar+":"):
				t.Fatalf("Validate() = %q, want it to name %s", err, tt.WantVar)
			}
		})
	}
}

// FromEnv returns defaults with the environment applied, as a service's
// main reads its Config (envconfig), failing the test if a variable does
// not parse.
func FromEnv[C any](t testing.TB, defaults C) C {
	t.Helper()
	if err := envconfig.Process("", &defaults); err != nil {
		t.Fatalf("Process: %v", err)
	}
	return defaults
}

// Unsetenv unsets key for the rest of the test and restores it after, so
// that a Config's default shows whatever the machine running the test
// has set.
func Unsetenv(t *testing.T, key string) {
	t.Setenv(key, "") // restores the old value after the test
	os.Unsetenv(key)
}
