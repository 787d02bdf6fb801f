package participant

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// Hooks for the tests in package participant_test.

// SetBuildInfo is setBuildInfo, which Run calls.
var SetBuildInfo = setBuildInfo

// Handled returns choreo_events_handled_total for the labels.
func Handled(service, eventType, outcome string) float64 {
	return testutil.ToFloat64(handled.WithLabelValues(service, eventType, outcome))
}

// Timed returns how many deliveries choreo_event_handle_duration_seconds
// has timed for the labels.
func Timed(service, eventType, outcome string) uint64 {
	var d dto.Metric
	if err := handleSeconds.WithLabelValues(service, eventType, outcome).(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return d.GetHistogram().GetSampleCount()
}
