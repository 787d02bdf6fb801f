// Command tracker runs the saga tracker: participant.Main reads its
// configuration from the environment (HTTP_ADDR, DATABASE_URL,
// KAFKA_BROKERS, TRACKER_SAGA_SLA, TRACKER_RETENTION, …) over
// tracker.DefaultConfig and runs tracker.Run until SIGINT or SIGTERM.
package main

import (
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/services/tracker"
)

func main() { participant.Main(tracker.Name, tracker.DefaultConfig(), tracker.Run) }
