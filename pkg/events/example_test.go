package events_test

import (
	"fmt"
	"time"

	"github.com/choreo-saga/choreo/pkg/events"
)

// A producer wraps a payload in an envelope; a consumer decodes both at
// once and switches on the payload's type.
func Example() {
	e, _ := events.New("payment", "order-42", events.PaymentDeclined{
		CustomerID: "c-1", Amount: 5000, Detail: "insufficient_funds",
	}, time.Now())
	wire, _ := e.Encode()

	got, payload, err := events.Decode(wire)
	if err != nil {
		fmt.Println("dead-letter:", err)
		return
	}
	switch p := payload.(type) {
	case events.PaymentDeclined:
		fmt.Println(got.OrderID, "declined:", p.Detail)
	}
	// Output: order-42 declined: insufficient_funds
}
