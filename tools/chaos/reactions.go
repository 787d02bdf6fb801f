package main

import (
	"slices"

	"github.com/choreo-saga/choreo/pkg/events"
)

// Reactions are the event types each service reacts to — its consumer
// group (the service's name) de-duplicates these and acknowledges the
// rest of its topics as not routed. The suite keeps its own copy, as a
// client knows the choreography, so that it can tell how many duplicates
// a pass that re-produces messages must cause; TestReactionsAreTheServices
// holds it to the services' own.
var Reactions = map[string][]string{
	"order": {events.TypeShipmentScheduled, events.TypePaymentDeclined, events.TypePaymentRefunded,
		events.TypePaymentCancelled, events.TypeInventoryCancelled, events.TypeShipmentCancelled},
	"payment":   {events.TypeOrderCreated, events.TypeInventoryRejected, events.TypeInventoryReleased, events.TypeOrderCancelRequested},
	"inventory": {events.TypePaymentCompleted, events.TypeShipmentFailed, events.TypeOrderCancelRequested},
	"shipping":  {events.TypeInventoryReserved, events.TypeOrderCancelRequested},
}

// Consumes returns the topics service's consumer group reads.
func Consumes(service string) []string {
	var topics []string
	for _, t := range Reactions[service] {
		if topic, ok := events.TopicOf(t); ok && !slices.Contains(topics, topic) {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	return topics
}

// duplicatesWanted is how many duplicates each service must count for
// messages re-produced unchanged (copies, by event type): each copy, or
// its original if that came later, is a duplicate to every service that
// reacts to its type.
func duplicatesWanted(copies map[string]int) map[string]int {
	out := map[string]int{}
	for _, s := range Services {
		for _, t := range Reactions[s] {
			out[s] += copies[t]
		}
	}
	return out
}
