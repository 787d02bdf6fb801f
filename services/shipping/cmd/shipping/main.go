// Command shipping runs the shipping service: participant.Main reads its
// configuration from the environment (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, SHIPPING_SERVED_COUNTRIES, …) over shipping.DefaultConfig
// and runs shipping.Run until SIGINT or SIGTERM.
package main

import (
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/shipping"
)

func main() { participant.Main(shipping.Name, shipping.DefaultConfig(), shipping.Run) }
