package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// OrderNamespace is the UUID namespace of the order ids IdempotentOrderID
// derives: itself the UUIDv5 of the URL
// "https://github.com/choreo-saga/choreo/orders" in the RFC 9562 URL
// namespace (6ba7b811-9dad-11d1-80b4-00c04fd430c8). Clients compute order
// ids with it, so it never changes.
var OrderNamespace = uuid.MustParse("5580bfa5-f3b2-5223-a630-ce8b08084e45")

// IdempotentOrderID returns the id of the order that customerID creates
// with Idempotency-Key key: the UUIDv5 (SHA-1) of "<customer_id>/<key>" in
// OrderNamespace (a customer_id never contains a "/"). It depends on
// nothing the server chooses, so a client that lost the response knows its
// order's id before asking, and a replay after a crash finds the same
// order:
//
//	uuid.uuid5(uuid.UUID("5580bfa5-f3b2-5223-a630-ce8b08084e45"), customer_id + "/" + key)  # Python
func IdempotentOrderID(customerID, key string) string {
	return uuid.NewSHA1(OrderNamespace, []byte(customerID+"/"+key)).String()
}

// Hash identifies the request a Draft came from, for Idempotency-Key
// replays: the SHA-256, in hex, of the draft's JSON. It is taken after
// decoding and normalising, so the same order sent with other whitespace,
// another field order, "jp" and "jpy" instead of "JP" and "JPY", or an
// omitted default currency hashes the same, while any change of content
// does not.
func (d Draft) Hash() string {
	// Marshalling a struct of strings, ints and slices cannot fail, and
	// encoding/json writes struct fields in declaration order.
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("domain: marshal draft: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
