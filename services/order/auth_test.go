package order_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/testenv"
	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/order/internal/httpapi"
)

// guardedAPI is the order API as the service serves it: behind
// bearer.Authenticate, which takes keys' tokens.
func guardedAPI(t *testing.T) (http.Handler, *sqlx.DB, testenv.Tokens) {
	t.Helper()
	db := testenv.DB(t, order.Schema)
	keys := testenv.Keys(t)
	v, err := bearer.New(t.Context(), keys.Auth(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	routes := httpapi.API{Service: order.Name, Now: time.Now}.Routes(quiet, db, nil)
	return v.Authenticate(quiet, bearer.OpenPaths...)(routes), db, keys
}

// state is what the order database holds: every order's status, and the
// outbox rows, each a saga step started.
func state(t *testing.T, db *sqlx.DB) (map[string]string, int) {
	t.Helper()
	var rows []struct{ ID, Status string }
	if err := db.Select(&rows, `SELECT id, status FROM orders`); err != nil {
		t.Fatal(err)
	}
	orders := map[string]string{}
	for _, r := range rows {
		orders[r.ID] = r.Status
	}
	var outbox int
	if err := db.Get(&outbox, `SELECT count(*) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	return orders, outbox
}

// wantUnchanged fails t unless the order database is as before.
func wantUnchanged(t *testing.T, db *sqlx.DB, orders map[string]string, outbox int) {
	t.Helper()
	gotOrders, gotOutbox := state(t, db)
	if len(gotOrders) != len(orders) || gotOutbox != outbox {
		t.Fatalf("order_db changed: %d orders and %d outbox rows, were %d and %d", len(gotOrders), gotOutbox, len(orders), outbox)
	}
	for id, status := range orders {
		if gotOrders[id] != status {
			t.Fatalf("order %s is %s, was %s", id, gotOrders[id], status)
		}
	}
}

func bearerHeader(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// TestRefusedTokens: a request without a valid token is refused with 401
// and a Bearer challenge, whatever it asks, and changes nothing: no
// order is created, none cancelled.
func TestRefusedTokens(t *testing.T) {
	h, db, keys := guardedAPI(t)
	alice := customer()
	created := do(t, h, "POST", "/orders", "application/json", orderBody(alice, 1), bearerHeader(keys.Customer(t, alice)))
	if created.status != http.StatusCreated {
		t.Fatalf("create with alice's token = %d %s", created.status, created.raw)
	}
	id, _ := created.body["id"].(string)

	good := bearer.Token{Issuer: devkey.Issuer, Audience: devkey.Audience, Subject: alice, TTL: time.Hour}
	other := testenv.Keys(t) // a key the service does not trust
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{
		"iss": devkey.Issuer, "aud": devkey.Audience, "sub": alice, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// The classic confusion: HS256 keyed with the public key, which
	// anyone may hold.
	hs256, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": devkey.Issuer, "aud": devkey.Audience, "sub": alice, "exp": time.Now().Add(time.Hour).Unix(), "roles": []string{"operator"},
	}).SignedString(keys.PublicKeyPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	with := func(change func(*bearer.Token)) string {
		tok := good
		change(&tok)
		return keys.Sign(t, tok)
	}
	tests := []struct {
		name, auth, detail string
	}{
		{"NoToken", "", "needs a token"},
		{"NotBearer", "Basic YWxpY2U6cHc=", "needs a token"},
		{"EmptyBearer", "Bearer ", "needs a token"},
		{"Malformed", "Bearer not.a.jwt", "token refused"},
		{"Expired", "Bearer " + keys.Expired(t, alice, false), "expired"},
		{"NoExpiry", "Bearer " + with(func(tk *bearer.Token) { tk.TTL = 0 }), "exp"},
		{"WrongIssuer", "Bearer " + with(func(tk *bearer.Token) { tk.Issuer = "https://evil.example" }), "issuer"},
		{"WrongAudience", "Bearer " + with(func(tk *bearer.Token) { tk.Audience = "another-shop" }), "audience"},
		{"SubjectNotAnID", "Bearer " + with(func(tk *bearer.Token) { tk.Subject = "a/b" }), "sub"},
		{"WronglySigned", "Bearer " + other.Customer(t, alice), "signature"},
		{"AlgNone", "Bearer " + none, "signing method"},
		{"HS256WithThePublicKey", "Bearer " + hs256, "signing method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orders, outbox := state(t, db)
			hdr := map[string]string{}
			if tt.auth != "" {
				hdr["Authorization"] = tt.auth
			}
			for _, rq := range []struct{ method, path, body string }{
				{"POST", "/orders", orderBody(alice, 2)},
				{"GET", "/orders/" + id, ""},
				{"GET", "/orders", ""},
				{"POST", "/orders/" + id + "/cancel", ""},
			} {
				r := do(t, h, rq.method, rq.path, "application/json", rq.body, hdr)
				if r.status != http.StatusUnauthorized || r.header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("%s %s = %d %s, want a 401 problem", rq.method, rq.path, r.status, r.raw)
				}
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="choreo"`) {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", r.header.Get("WWW-Authenticate"))
				}
				if d, _ := r.body["detail"].(string); !strings.Contains(d, tt.detail) {
					t.Errorf("%s %s: detail %q does not say %q", rq.method, rq.path, d, tt.detail)
				}
			}
			wantUnchanged(t, db, orders, outbox)
		})
	}
	t.Run("OpenPathsNeedNone", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/openapi.yaml"} {
			if r := do(t, h, "GET", path, "", "", nil); r.status != http.StatusOK {
				t.Errorf("GET %s without a token = %d, want 200", path, r.status)
			}
		}
	})
}

// TestCustomersOwnTheirOrders: the customer is the token's subject. A
// customer creates orders for themselves only, and reads, lists and
// cancels their own; another customer's order is a 404, as if there were
// none, and stays as it was. An operator acts on everyone's.
func TestCustomersOwnTheirOrders(t *testing.T) {
	h, db, keys := guardedAPI(t)
	alice, bob := customer(), customer()
	aliceTok, bobTok, opTok := keys.Customer(t, alice), keys.Customer(t, bob), keys.Operator(t)
	noCustomer := `{"items":[{"sku":"SKU-1","quantity":1,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP"}}`

	t.Run("CreateWithoutCustomerIsTheSubjects", func(t *testing.T) {
		r := do(t, h, "POST", "/orders", "application/json", noCustomer, bearerHeader(aliceTok))
		if r.status != http.StatusCreated || r.body["customer_id"] != alice {
			t.Fatalf("create = %d %s, want 201 for %s", r.status, r.raw, alice)
		}
	})
	t.Run("CreateForAnotherCustomerRefused", func(t *testing.T) {
		orders, outbox := state(t, db)
		r := do(t, h, "POST", "/orders", "application/json", orderBody(bob, 1), bearerHeader(aliceTok))
		if r.status != http.StatusForbidden {
			t.Fatalf("alice creating bob's order = %d %s, want 403", r.status, r.raw)
		}
		wantUnchanged(t, db, orders, outbox)
	})
	t.Run("OperatorCreatesForTheCustomerNamed", func(t *testing.T) {
		r := do(t, h, "POST", "/orders", "application/json", orderBody(bob, 1), bearerHeader(opTok))
		if r.status != http.StatusCreated || r.body["customer_id"] != bob {
			t.Fatalf("operator creating bob's order = %d %s, want 201 for %s", r.status, r.raw, bob)
		}
	})
	t.Run("OperatorMustNameTheCustomer", func(t *testing.T) {
		if r := do(t, h, "POST", "/orders", "application/json", noCustomer, bearerHeader(opTok)); r.status != http.StatusBadRequest {
			t.Fatalf("operator creating an order for no one = %d %s, want 400", r.status, r.raw)
		}
	})

	r := do(t, h, "POST", "/orders", "application/json", orderBody(alice, 2), bearerHeader(aliceTok))
	if r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	aliceOrder, _ := r.body["id"].(string)
	missing := do(t, h, "GET", "/orders/00000000-0000-4000-8000-000000000000", "", "", bearerHeader(bobTok))

	t.Run("AnotherCustomersOrderIsNotFound", func(t *testing.T) {
		orders, outbox := state(t, db)
		for _, rq := range []struct{ method, path string }{
			{"GET", "/orders/" + aliceOrder},
			{"POST", "/orders/" + aliceOrder + "/cancel"},
		} {
			r := do(t, h, rq.method, rq.path, "", "", bearerHeader(bobTok))
			if r.status != http.StatusNotFound || r.body["title"] != missing.body["title"] {
				t.Fatalf("bob: %s %s = %d %s, want the 404 of no order", rq.method, rq.path, r.status, r.raw)
			}
			if strings.Contains(r.raw, alice) {
				t.Errorf("the 404 names the owner: %s", r.raw)
			}
		}
		wantUnchanged(t, db, orders, outbox)
		if orders[aliceOrder] != "PENDING" {
			t.Fatalf("alice's order is %s, want PENDING", orders[aliceOrder])
		}
	})
	t.Run("ListHoldsTheCustomersOwn", func(t *testing.T) {
		for _, tt := range []struct {
			name, token, query, want string
			n                        int
		}{
			{"Alice", aliceTok, "", alice, 2},
			{"AliceFilteringByHerself", aliceTok, "?customer_id=" + alice, alice, 2},
			{"AliceFilteringByBob", aliceTok, "?customer_id=" + bob, "", 0},
			{"Bob", bobTok, "", bob, 1},
			{"OperatorFilteringByBob", opTok, "?customer_id=" + bob, bob, 1},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := do(t, h, "GET", "/orders"+tt.query, "", "", bearerHeader(tt.token))
				list, _ := r.body["orders"].([]any)
				if r.status != http.StatusOK || len(list) != tt.n {
					t.Fatalf("GET /orders%s = %d with %d orders, want %d: %s", tt.query, r.status, len(list), tt.n, r.raw)
				}
				for _, o := range list {
					if o.(map[string]any)["customer_id"] != tt.want {
						t.Fatalf("GET /orders%s lists another customer's order: %v", tt.query, o)
					}
				}
			})
		}
		r := do(t, h, "GET", "/orders?limit=100", "", "", bearerHeader(opTok))
		if list, _ := r.body["orders"].([]any); len(list) != 3 {
			t.Fatalf("the operator lists %d orders, want all 3: %s", len(list), r.raw)
		}
	})
	t.Run("OwnerReadsAndCancels", func(t *testing.T) {
		if r := do(t, h, "GET", "/orders/"+aliceOrder, "", "", bearerHeader(aliceTok)); r.status != http.StatusOK {
			t.Fatalf("alice reading her order = %d %s", r.status, r.raw)
		}
		if r := do(t, h, "POST", "/orders/"+aliceOrder+"/cancel", "", "", bearerHeader(aliceTok)); r.status != http.StatusAccepted {
			t.Fatalf("alice cancelling her order = %d %s", r.status, r.raw)
		}
		if orders, _ := state(t, db); orders[aliceOrder] != "CANCELLING" {
			t.Fatalf("alice's order is %s, want CANCELLING", orders[aliceOrder])
		}
	})
	t.Run("OperatorReadsEveryones", func(t *testing.T) {
		if r := do(t, h, "GET", "/orders/"+aliceOrder, "", "", bearerHeader(opTok)); r.status != http.StatusOK || r.body["customer_id"] != alice {
			t.Fatalf("operator reading alice's order = %d %s", r.status, r.raw)
		}
	})
}

// TestCrossSiteCancelRefused: a web page that makes the browser post to
// the cancel route sends the site's cookies but no Authorization header
// (a bearer token is never sent by itself), so the cancel is refused and
// the order stays as it was.
func TestCrossSiteCancelRefused(t *testing.T) {
	h, db, keys := guardedAPI(t)
	alice := customer()
	r := do(t, h, "POST", "/orders", "application/json", orderBody(alice, 1), bearerHeader(keys.Customer(t, alice)))
	if r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	id, _ := r.body["id"].(string)
	orders, outbox := state(t, db)
	r = do(t, h, "POST", "/orders/"+id+"/cancel", "application/x-www-form-urlencoded", "", map[string]string{
		"Cookie":         "session=" + keys.Customer(t, alice),
		"Origin":         "https://evil.example",
		"Sec-Fetch-Site": "cross-site",
		"Sec-Fetch-Mode": "no-cors",
	})
	if r.status != http.StatusUnauthorized {
		t.Fatalf("cross-site cancel = %d %s, want 401", r.status, r.raw)
	}
	wantUnchanged(t, db, orders, outbox)
	if orders[id] != "PENDING" {
		t.Fatalf("order is %s, want PENDING", orders[id])
	}
}
