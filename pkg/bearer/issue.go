package bearer

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token is what Issue signs.
type Token struct {
	Issuer, Audience string
	// Subject is the caller: the customer's id, or the operator's name.
	Subject  string
	Operator bool
	// TTL is how long the token is good for, from now; 0 leaves exp out,
	// which Verify refuses.
	TTL time.Duration
	// KeyID, if set, is the header's kid: the key of a JWKS to verify with.
	KeyID string
}

// Issue signs t with key, an Ed25519 private key (EdDSA): what an
// identity provider does, for development and tests (choreoctl token).
func Issue(key ed25519.PrivateKey, t Token) (string, error) {
	now := time.Now()
	c := claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:   t.Issuer,
		Subject:  t.Subject,
		Audience: jwt.ClaimStrings{t.Audience},
		IssuedAt: jwt.NewNumericDate(now),
	}}
	if t.TTL != 0 {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(t.TTL))
	}
	if t.Operator {
		c.Roles = []string{RoleOperator}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	if t.KeyID != "" {
		tok.Header["kid"] = t.KeyID
	}
	s, err := tok.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

// Key file names in a key pair's directory (see WriteKeyPair).
const (
	PrivateKeyFile = "private.pem"
	PublicKeyFile  = "public.pem"
)

// WriteKeyPair makes an Ed25519 key pair in dir (created 0700) unless
// one is there, the private key readable by its owner only, and returns
// the private key and the public key file's path.
func WriteKeyPair(dir string) (ed25519.PrivateKey, string, error) {
	pubPath := filepath.Join(dir, PublicKeyFile)
	if key, err := ReadPrivateKey(filepath.Join(dir, PrivateKeyFile)); err == nil {
		if _, err := os.Stat(pubPath); err == nil {
			return key, pubPath, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("key pair: %w", err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("key pair: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, "", fmt.Errorf("key pair: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, "", fmt.Errorf("key pair: %w", err)
	}
	// The public key first: a private key without it is made again.
	if err := writePEM(pubPath, "PUBLIC KEY", pubDER, 0o644); err != nil {
		return nil, "", err
	}
	if err := writePEM(filepath.Join(dir, PrivateKeyFile), "PRIVATE KEY", priv, 0o600); err != nil {
		return nil, "", err
	}
	return key, pubPath, nil
}

// ReadPrivateKey reads the Ed25519 private key WriteKeyPair wrote; an
// error wrapping os.ErrNotExist if there is none.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read private key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM \"PRIVATE KEY\"", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T key, want Ed25519", path, k)
	}
	return ed, nil
}

// writePEM writes one PEM block to path with mode, whole: a reader never
// sees half a key.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := pem.Encode(tmp, &pem.Block{Type: typ, Bytes: der}); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
