package bearer

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// verifier returns a Verifier of a new development key pair, on a clock
// the test moves, and a function signing tokens of that key for ttl.
func verifier(t testing.TB) (*Verifier, *time.Time, func(sub string, ttl time.Duration, kid string) string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "key")
	priv, pub, err := WriteKeyPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(t.Context(), Config{PublicKeyFile: pub, Issuer: "iss", Audience: "aud"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v.now = func() time.Time { return now }
	sign := func(sub string, ttl time.Duration, kid string) string {
		s, err := Issue(priv, Token{Issuer: "iss", Audience: "aud", Subject: sub, TTL: ttl, KeyID: kid})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return v, &now, sign
}

// TestVerifierRemembers: a token that verified is taken again without a
// second signature check, but only until its expiry and for RememberFor at
// most; a refused token is not remembered, so a forgery is checked, and
// refused, every time; nor is a token too long to be worth holding. (TestJWKSKeyRotation shows a remembered token
// refused once its key leaves the JWKS.)
func TestVerifierRemembers(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration
		forge   bool
		long    bool
		after   time.Duration
		want    bool
		wantLen int
	}{
		{"AcceptedTokenIsRemembered", time.Hour, false, false, time.Second, true, 1},
		{"NotPastItsExpiry", 10 * time.Second, false, false, 11 * time.Second, false, 0},
		{"NotPastRememberFor", time.Hour, false, false, RememberFor + time.Second, false, 0},
		{"RefusedTokenIsNot", time.Hour, true, false, 0, false, 0},
		{"LongTokenIsNot", time.Hour, false, true, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, now, sign := verifier(t)
			kid := "" // a key file's Verifier reads no kid: a long one pads the token
			if tt.long {
				kid = strings.Repeat("k", rememberBytes)
			}
			token := sign("c-1", tt.ttl, kid)
			if tt.forge {
				token = token[:len(token)-4] + "AAAA"
			}
			_, err := v.Verify(t.Context(), token)
			if (err != nil) != tt.forge {
				t.Fatalf("Verify = %v, want refused %v", err, tt.forge)
			}
			*now = now.Add(tt.after)
			c, ok := v.recall(t.Context(), token)
			if ok != tt.want || (ok && c != (Caller{Subject: "c-1"})) {
				t.Errorf("recall after %s = %+v, %v; want %v", tt.after, c, ok, tt.want)
			}
			if n := v.remembered.Len(); n != tt.wantLen {
				t.Errorf("%d tokens remembered, want %d", n, tt.wantLen)
			}
		})
	}
}

// BenchmarkVerify is why remember.go exists: a remembered token costs a
// map lookup, a first one an Ed25519 verification.
func BenchmarkVerify(b *testing.B) {
	v, _, sign := verifier(b)
	b.Run("FirstTime", func(b *testing.B) {
		tokens := make([]string, b.N)
		for i := range tokens {
			tokens[i] = sign(fmt.Sprint("c-", i), time.Hour, "")
		}
		b.ResetTimer()
		for i := range b.N {
			if _, err := v.Verify(b.Context(), tokens[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Remembered", func(b *testing.B) {
		token := sign("c-1", time.Hour, "")
		for b.Loop() {
			if _, err := v.Verify(b.Context(), token); err != nil {
				b.Fatal(err)
			}
		}
	})
}
