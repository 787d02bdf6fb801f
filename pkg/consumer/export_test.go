package consumer

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Lag returns the lag gauge of service's claim of topic/partition.
func Lag(service, topic string, partition int32) float64 {
	return testutil.ToFloat64(lag.WithLabelValues(service, topic, strconv.Itoa(int(partition))))
}
