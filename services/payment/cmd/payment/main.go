// Command payment runs the payment service: participant.Main reads its
// configuration from the environment (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, …) over payment.DefaultConfig and runs payment.Run until
// SIGINT or SIGTERM.
package main

import (
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/payment"
)

func main() { participant.Main(payment.Name, payment.DefaultConfig(), payment.Run) }
