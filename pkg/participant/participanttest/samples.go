package participanttest

import (
	"io"
	"log/slog"

	"github.com/choreo-saga/choreo/pkg/events"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// samples holds one valid payload of every event type, for the events a
// service must acknowledge without effect.
var samples = []events.Payload{
	events.OrderCreated{CustomerID: "c-sample", Items: sampleItems, TotalAmount: 1000, Currency: "JPY", ShippingAddress: sampleAddress},
	events.PaymentCompleted{CustomerID: "c-sample", Amount: 1000, Currency: "JPY", Items: sampleItems, ShippingAddress: sampleAddress},
	events.PaymentDeclined{CustomerID: "c-sample", Amount: 1000, Detail: "insufficient_funds"},
	events.PaymentRefunded{CustomerID: "c-sample", Amount: 1000, Reason: events.ReasonOutOfStock},
	events.InventoryReserved{Items: sampleItems, ShippingAddress: sampleAddress},
	events.InventoryRejected{Reason: events.ReasonOutOfStock, Shortages: []events.Shortage{{SKU: "sku-sample", Requested: 1}}},
	events.InventoryReleased{Items: sampleItems, Reason: events.ReasonShippingUnavailable},
	events.ShipmentScheduled{Country: "JP"},
	events.ShipmentFailed{Country: "XX", Reason: events.ReasonShippingUnavailable},
	events.OrderCompleted{},
	events.OrderCancelled{Reason: events.ReasonOutOfStock},
	events.OrderCancelRequested{Reason: events.ReasonCustomerCancelled},
	events.PaymentCancelled{CustomerID: "c-sample", Amount: 1000},
	events.InventoryCancelled{Items: sampleItems},
	events.ShipmentCancelled{WasScheduled: true},
}

var (
	sampleItems   = []events.Item{{SKU: "sku-sample", Quantity: 1, UnitPrice: 1000}}
	sampleAddress = events.Address{Country: "JP"}
)
