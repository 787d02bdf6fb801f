package web

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// Requests returns choreo_http_requests_total for the labels.
func Requests(service, method, route, code string) float64 {
	return testutil.ToFloat64(httpRequests.WithLabelValues(service, method, route, code))
}

// Timed returns how many requests choreo_http_request_duration_seconds has
// timed for the labels.
func Timed(service, method, route string) uint64 {
	var d dto.Metric
	if err := httpSeconds.WithLabelValues(service, method, route).(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return d.GetHistogram().GetSampleCount()
}
