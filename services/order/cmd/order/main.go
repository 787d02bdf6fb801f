// Command order runs the order service: participant.Main reads its
// configuration from the environment (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, …) over order.DefaultConfig and runs order.Run until
// SIGINT or SIGTERM.
package main

import (
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/order"
)

func main() { participant.Main(order.Name, order.DefaultConfig(), order.Run) }
