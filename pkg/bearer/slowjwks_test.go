package bearer_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/choreo-saga/choreo/pkg/bearer"
)

// TestASlowJWKSStillDeliversARotatedKey: an IdP answering the unknown-kid
// refresh in 1.5 s gets its rotated key picked up: the fetch has the whole
// HTTP timeout, not the 1 s a limiter wait once cut it to.
func TestASlowJWKSStillDeliversARotatedKey(t *testing.T) {
	set := &jwks{}
	set.publish(t, "ed25519")
	var slow atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(1500 * time.Millisecond)
		}
		set.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	v, err := bearer.New(t.Context(), bearer.Config{JWKSURL: srv.URL, Issuer: issuer, Audience: audience}, discard)
	if err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	set.publish(t, "ed25519", "p256")
	_, err = v.Verify(t.Context(), sign(t, jwt.SigningMethodES256, keys()["p256"], "p256", claims(nil)))
	if err != nil {
		t.Errorf("a JWKS that answers in 1.5 s did not deliver its rotated key: %v", err)
	}
}

// TestJWKSURLMustBeHTTPSOffThisMachine: whoever can change the keys in
// transit can sign operator tokens, so plain http is taken only from this
// machine.
func TestJWKSURLMustBeHTTPSOffThisMachine(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://idp.example/.well-known/jwks.json", true},
		{"http://127.0.0.1:8443/jwks", true},
		{"http://localhost/jwks", true},
		{"http://[::1]:9000/jwks", true},
		{"http://idp.example/jwks", false},
		{"http://10.0.0.5/jwks", false},
		{"ftp://idp.example/jwks", false},
		{"idp.example/jwks", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := bearer.Config{JWKSURL: tt.url, Issuer: issuer, Audience: audience}.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%s) = %v, want ok=%v", tt.url, err, tt.ok)
			}
		})
	}
}
