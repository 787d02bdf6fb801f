// Package devkey keeps the development token key the local run modes
// share (make run, deploy/local, scripts/perf.sh, the tools): an Ed25519
// key pair made on first use in a directory of the user's, never in the
// repository. The services verify with its public key; choreoctl token
// signs with its private key, as an identity provider would.
package devkey

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"time"

	"github.com/choreo-saga/choreo/pkg/bearer"
)

// EnvDir names the variable that overrides the key pair's directory.
const EnvDir = "CHOREO_DEV_KEY_DIR"

// The issuer and audience of development tokens, which the local modes
// give the services as AUTH_ISSUER and AUTH_AUDIENCE.
const (
	Issuer   = "choreo-dev"
	Audience = "choreo"
)

// Dir is the key pair's directory: $CHOREO_DEV_KEY_DIR, else
// $XDG_CACHE_HOME/choreo/dev-key, else $HOME/.cache/choreo/dev-key.
// scripts/run.sh asks choreoctl for it.
func Dir(getenv func(string) string) (string, error) {
	if d := getenv(EnvDir); d != "" {
		return d, nil
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "choreo", "dev-key"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "choreo", "dev-key"), nil
	}
	return "", fmt.Errorf("dev key: set %s, XDG_CACHE_HOME or HOME", EnvDir)
}

// Key is the development key pair of one directory.
type Key struct {
	private ed25519.PrivateKey
	// PublicKeyFile is the public key's PEM file, the services'
	// AUTH_PUBLIC_KEY_FILE.
	PublicKeyFile string
}

// Open returns the key pair in dir, made first if there is none.
func Open(dir string) (Key, error) {
	priv, pub, err := bearer.WriteKeyPair(dir)
	if err != nil {
		return Key{}, fmt.Errorf("dev key: %w", err)
	}
	return Key{private: priv, PublicKeyFile: pub}, nil
}

// Auth is the services' configuration that accepts k's tokens.
func (k Key) Auth() bearer.Config {
	return bearer.Config{PublicKeyFile: k.PublicKeyFile, Issuer: Issuer, Audience: Audience}
}

// Env is Auth as environment variables, for a service started as a
// process.
func (k Key) Env() []string {
	return []string{"AUTH_PUBLIC_KEY_FILE=" + k.PublicKeyFile, "AUTH_ISSUER=" + Issuer, "AUTH_AUDIENCE=" + Audience}
}

// Token returns a token of subject, an operator's if operator, good for ttl.
func (k Key) Token(subject string, operator bool, ttl time.Duration) (string, error) {
	return bearer.Issue(k.private, bearer.Token{Issuer: Issuer, Audience: Audience, Subject: subject, Operator: operator, TTL: ttl})
}

// Sign signs t as it is, issuer and audience included: for tests of
// tokens the services must refuse.
func (k Key) Sign(t bearer.Token) (string, error) { return bearer.Issue(k.private, t) }
