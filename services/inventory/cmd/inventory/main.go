// Command inventory runs the inventory service: participant.Main reads its
// configuration from the environment (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, …) over inventory.DefaultConfig and runs inventory.Run until
// SIGINT or SIGTERM.
package main

import (
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/inventory"
)

func main() { participant.Main(inventory.Name, inventory.DefaultConfig(), inventory.Run) }
