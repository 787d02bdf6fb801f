package domain_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/choreo-saga/choreo/services/order/internal/domain"
)

func TestOrderNamespaceIsTheURLNamespaceName(t *testing.T) {
	want := uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/choreo-saga/choreo/orders"))
	if domain.OrderNamespace != want {
		t.Fatalf("OrderNamespace = %s, want %s: clients compute order ids with it", domain.OrderNamespace, want)
	}
}

func TestIdempotentOrderID(t *testing.T) {
	tests := []struct {
		name          string
		customer, key string
		want          string // "" when only the properties below are checked
	}{
		// Pinned: the README's formula, e.g. Python's
		// uuid.uuid5(uuid.UUID("5580bfa5-…"), "c-1/demo-1"), gives this id.
		{"PinnedValue", "c-1", "demo-1", "92113d6b-9b71-5272-9e34-cd4a24e34d37"},
		{"OtherKey", "c-1", "demo-2", ""},
		{"OtherCustomer", "c-2", "demo-1", ""},
		{"SlashInKeyIsNotASeparator", "c-1", "a/b", ""},
		{"LongestKey", "c-1", strings.Repeat("k", domain.MaxIdempotencyKeyLen), ""},
		{"KeyThatLooksLikeACustomer", "c", "1/demo-1", ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.IdempotentOrderID(tt.customer, tt.key)
			if tt.want != "" && got != tt.want {
				t.Fatalf("IdempotentOrderID(%q, %q) = %s, want %s", tt.customer, tt.key, got, tt.want)
			}
			u, err := uuid.Parse(got)
			if err != nil || u.Version() != 5 || u.Variant() != uuid.RFC4122 || u.String() != got {
				t.Fatalf("IdempotentOrderID = %q: want a canonical RFC 9562 version 5 UUID (%v)", got, err)
			}
			if again := domain.IdempotentOrderID(tt.customer, tt.key); again != got {
				t.Fatalf("not deterministic: %s then %s", got, again)
			}
			if other, ok := seen[got]; ok {
				t.Fatalf("%s/%s has the id of %s", tt.customer, tt.key, other)
			}
			seen[got] = tt.customer + "/" + tt.key
		})
	}
}
