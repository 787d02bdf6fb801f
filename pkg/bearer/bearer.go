// Package bearer is identity at the edge: every request to a service's API
// carries "Authorization: Bearer <JWT>", verified here against a public
// key (a PEM file, or a JWKS URL for an identity provider that rotates its
// keys) with its issuer, audience and expiry. The token's subject is the
// caller; the role "operator" in its "roles" claim lets it act on what is
// not its own (balances, stock, everyone's orders, /admin).
//
// Authenticate refuses what has no valid token with 401 before any route
// runs, so a route added later is closed until it says otherwise; the
// routes then decide what the caller may touch (RequireOperator,
// OwnerOrOperator, or a handler reading From).
package bearer

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/time/rate"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
)

// RoleOperator is the role, in the "roles" claim, of who runs the shop.
const RoleOperator = "operator"

// Leeway is the clock skew tolerated on exp, nbf and iat.
const Leeway = 30 * time.Second

// Algorithms are the signatures accepted from a JWKS; a key file accepts
// only its own key's. HS256 and none are never among them: a public key
// used as an HMAC secret would let anyone who has it sign.
var Algorithms = []string{"EdDSA", "ES256", "RS256"}

// Config is where a service finds its token keys, read once from the
// environment (AUTH_*). Exactly one of JWKSURL and PublicKeyFile is set,
// with Issuer and Audience, unless Disabled.
type Config struct {
	// JWKSURL is the identity provider's key set, e.g.
	// https://idp.example/.well-known/jwks.json, refreshed hourly and when
	// a token names a key id it does not hold.
	JWKSURL string `envconfig:"JWKS_URL"`
	// PublicKeyFile is a PEM public key (Ed25519, ECDSA P-256 or RSA),
	// e.g. the development key `choreoctl dev-key` makes.
	PublicKeyFile string `envconfig:"PUBLIC_KEY_FILE"`
	// Issuer is the iss every token must have.
	Issuer string `envconfig:"ISSUER"`
	// Audience is a value every token's aud must contain.
	Audience string `envconfig:"AUDIENCE"`
	// Disabled serves every request as an operator's, without a token:
	// an explicit opt-out for a closed network, warned about at start,
	// never a default. /admin is off then.
	Disabled bool `envconfig:"DISABLED"`
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error {
	switch {
	case c.Disabled && (c.JWKSURL != "" || c.PublicKeyFile != ""):
		return errors.New("AUTH_DISABLED: true with a key configured; unset one of them")
	case c.Disabled:
		return nil
	case c.JWKSURL == "" && c.PublicKeyFile == "":
		return errors.New("AUTH_PUBLIC_KEY_FILE: no token key configured: set AUTH_PUBLIC_KEY_FILE (`choreoctl dev-key` makes one for development) " +
			"or AUTH_JWKS_URL, or AUTH_DISABLED=true to serve without authentication")
	case c.JWKSURL != "" && c.PublicKeyFile != "":
		return errors.New("AUTH_JWKS_URL: set AUTH_JWKS_URL or AUTH_PUBLIC_KEY_FILE, not both")
	case c.Issuer == "":
		return errors.New("AUTH_ISSUER: empty; tokens are checked against it")
	case c.Audience == "":
		return errors.New("AUTH_AUDIENCE: empty; tokens are checked against it")
	}
	if c.JWKSURL != "" {
		u, err := url.Parse(c.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("AUTH_JWKS_URL: %q is not an http(s) URL", c.JWKSURL)
		}
		// Whoever can change the keys in transit can sign operator tokens.
		if u.Scheme == "http" && !loopback(u.Hostname()) {
			return fmt.Errorf("AUTH_JWKS_URL: %q is plain http; the token keys must come over https (http only from this machine)", c.JWKSURL)
		}
	}
	return nil
}

// jwksTimeout bounds one fetch of the JWKS.
const jwksTimeout = 10 * time.Second

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Caller is who sent a request: a customer, or an operator.
type Caller struct {
	// Subject is the token's sub: the customer's id for a customer.
	Subject string
	// Operator is the operator role.
	Operator bool
}

// claims are a token's claims: the registered ones and the roles.
type claims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles,omitempty"`
}

// Verifier checks tokens. Its zero value is not usable; see New.
type Verifier struct {
	disabled bool
	parser   *jwt.Parser
	// key returns the key of a token, for the request of ctx: a JWKS
	// refresh it waits for ends with the request.
	key func(ctx context.Context) jwt.Keyfunc
	// remembered are the tokens accepted lately (remember.go); now is
	// the clock they are taken by.
	remembered *expirable.LRU[string, accepted]
	now        func() time.Time
}

// RefreshUnknownKey is how often at most a token naming a key id the
// JWKS does not hold makes the Verifier fetch the JWKS again: a rotated
// key is picked up at once, and forged key ids cannot flood the identity
// provider. A token arriving before the next fetch is due is refused at
// once, not held.
const RefreshUnknownKey = time.Minute

// New returns the Verifier cfg describes, having read its key file or
// started fetching its JWKS (refreshed until ctx ends). With cfg.Disabled
// it logs a warning to log and lets every request through as an operator.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Disabled {
		log.Warn("AUTHENTICATION DISABLED (AUTH_DISABLED=true): anyone who reaches this port acts as an operator " +
			"on every customer's orders, balances and stock; /admin is off. Never run so outside a closed test network")
		return &Verifier{disabled: true}, nil
	}
	methods := Algorithms
	var key func(context.Context) jwt.Keyfunc
	if cfg.PublicKeyFile != "" {
		pub, alg, err := ReadPublicKey(cfg.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("AUTH_PUBLIC_KEY_FILE: %w", err)
		}
		methods = []string{alg}
		key = func(context.Context) jwt.Keyfunc { return func(*jwt.Token) (any, error) { return pub, nil } }
	} else {
		kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
			HTTPTimeout:       jwksTimeout,
			RefreshUnknownKID: rate.NewLimiter(rate.Every(RefreshUnknownKey), 1),
			// jwkset runs the fetch under this wait's deadline too, so it is
			// the fetch's whole timeout; a request waits only for a slot
			// that opens within it, and is refused at once otherwise.
			RateLimitWaitMax: jwksTimeout,
			// Tokens with made-up kids can take every unknown-kid slot; the
			// scheduled refresh then still brings a rotated key within this.
			RefreshInterval: 5 * time.Minute,
			RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
				return func(ctx context.Context, err error) {
					log.WarnContext(ctx, "token keys not refreshed", "jwks_url", u, "err", err)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("AUTH_JWKS_URL: %w", err)
		}
		key = kf.KeyfuncCtx
	}
	return &Verifier{
		parser: jwt.NewParser(jwt.WithValidMethods(methods), jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(Leeway)),
		key:        key,
		remembered: newRemembered(),
		now:        time.Now,
	}, nil
}

// Disabled reports whether v lets every request through (AUTH_DISABLED).
func (v *Verifier) Disabled() bool { return v.disabled }

// Verify returns the caller token names, or why it is refused: a bad
// signature, an algorithm not accepted, a wrong issuer or audience, an
// expiry passed or missing, or a subject that is not an id.
func (v *Verifier) Verify(ctx context.Context, token string) (Caller, error) {
	if caller, ok := v.recall(ctx, token); ok {
		return caller, nil
	}
	var c claims
	var key any
	keyOf := v.key(ctx)
	t, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		k, err := keyOf(t)
		key = k
		return k, err
	})
	if err != nil {
		return Caller{}, err
	}
	if !events.ValidID(c.Subject) {
		return Caller{}, fmt.Errorf("sub must be %s", events.IDRule)
	}
	caller := Caller{Subject: c.Subject, Operator: slices.Contains(c.Roles, RoleOperator)}
	v.remember(token, t, key, caller, c.ExpiresAt.Time)
	return caller, nil
}

type callerKey struct{}

// From returns the caller Authenticate verified for the request of ctx;
// false if there is none, which a route must refuse.
func From(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx carrying c, as Authenticate leaves it for the
// routes; a test of a router alone uses it to stand in for Authenticate.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// Authenticate returns middleware that answers 401 to a request without a
// valid bearer token, except on the open paths (exact paths: health,
// metrics, the OpenAPI document, a page's assets), and hands the routes
// the verified Caller (see From).
func (v *Verifier) Authenticate(log *slog.Logger, open ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slices.Contains(open, r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			if v.disabled {
				next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), Caller{Operator: true})))
				return
			}
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || token == "" {
				unauthorized(w, r, log, "", "this API needs a token: Authorization: Bearer <token>")
				return
			}
			c, err := v.Verify(r.Context(), token)
			if err != nil {
				// The reason goes to the caller, whose token it is: an
				// expired token reads differently from a forged one.
				unauthorized(w, r, log, "invalid_token", "token refused: "+err.Error())
				return
			}
			next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
		})
	}
}

// OpenPaths are the paths every service serves without a token: liveness
// and readiness for the orchestrator, the OpenAPI document, and metrics,
// which carry counts and latencies but no customer's data, for a
// Prometheus that holds no token (bind the port apart to hide them).
var OpenPaths = []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"}

// unauthorized answers 401 with the challenge of RFC 6750.
func unauthorized(w http.ResponseWriter, r *http.Request, log *slog.Logger, code, detail string) {
	challenge := `Bearer realm="choreo"`
	if code != "" {
		challenge += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	// Logged here: Authenticate runs before the router's access log, and a
	// run of forged tokens is what an operator must be able to see.
	log.InfoContext(r.Context(), "request refused: no valid token",
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", detail)
	web.Respond(w, r, log, &web.Error{Status: http.StatusUnauthorized, Detail: detail})
}

// Refuse answers a request the caller may not make: 401 if Authenticate
// left no caller, 403 otherwise.
func Refuse(w http.ResponseWriter, r *http.Request, log *slog.Logger, detail string) {
	if _, ok := From(r.Context()); !ok {
		unauthorized(w, r, log, "", "this API needs a token: Authorization: Bearer <token>")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="choreo", error="insufficient_scope"`)
	c, _ := From(r.Context())
	log.InfoContext(r.Context(), "request refused: not allowed",
		"method", r.Method, "path", r.URL.Path, "subject", c.Subject, "reason", detail)
	web.Respond(w, r, log, &web.Error{Status: http.StatusForbidden, Detail: detail})
}

// RequireOperator returns middleware that lets only an operator through.
func RequireOperator(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c, _ := From(r.Context()); !c.Operator {
				Refuse(w, r, log, "this needs the operator role")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// OwnerOrOperator returns middleware that lets through an operator, and a
// customer whose id is the path parameter param: a customer reads their
// own account.
func OwnerOrOperator(log *slog.Logger, param string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, ok := From(r.Context())
			if !c.Operator && (!ok || c.Subject != chi.URLParam(r, param)) {
				Refuse(w, r, log, "a customer may only read their own; this needs the operator role")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ReadPublicKey reads a PEM public key and returns it with the one
// algorithm it verifies: EdDSA for Ed25519, ES256 for ECDSA P-256, RS256
// for RSA of at least 2048 bits.
func ReadPublicKey(path string) (any, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read public key: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, "", fmt.Errorf("%s: not a PEM \"PUBLIC KEY\"", path)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return k, "EdDSA", nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, "", fmt.Errorf("%s: ECDSA key on %s, want P-256 (ES256)", path, k.Curve.Params().Name)
		}
		return k, "ES256", nil
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, "", fmt.Errorf("%s: RSA key of %d bits, want at least 2048", path, k.N.BitLen())
		}
		return k, "RS256", nil
	}
	return nil, "", fmt.Errorf("%s: a %T key; want Ed25519, ECDSA P-256 or RSA", path, pub)
}
