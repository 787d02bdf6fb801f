package participant

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// buildInfo is always 1; its labels say what is running, so a dashboard
// can show which version each service runs and a deploy shows as a change
// of series.
var buildInfo = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "choreo_build_info",
	Help: "1, labelled by service, the module version, the VCS revision and the Go version the binary was built with.",
}, []string{"service", "version", "revision", "go_version"})

// setBuildInfo publishes choreo_build_info for service, from what the Go
// toolchain embedded in the binary. What it did not embed (a test binary, a
// build with -buildvcs=false) reads "unknown".
func setBuildInfo(service string) {
	version, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	buildInfo.WithLabelValues(service, version, revision, runtime.Version()).Set(1)
}
