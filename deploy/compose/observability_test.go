package compose_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The observability services of compose.yaml, and where Grafana finds its
// dashboards inside its container.
const (
	prometheusService = "prometheus"
	grafanaService    = "grafana"
	jaegerService     = "jaeger"
	// jaegerOTLPHTTP is Jaeger's OTLP/HTTP port.
	jaegerOTLPHTTP = "4318"
	// trackerService is scraped too when compose.yaml runs it.
	trackerService = "tracker"
)

func TestComposeObservabilityServices(t *testing.T) {
	p := loadProject(t)
	for _, name := range []string{prometheusService, grafanaService, jaegerService} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("missing service %q", name)
		}
	}
}

// TestComposeMountedFilesExist: every file or directory a service mounts
// from the repository is there, so `docker compose up` does not create an
// empty directory in its place. The token key is the host's, not the
// repository's (TestComposeVerifiesTokensWithTheGivenKey).
func TestComposeMountedFilesExist(t *testing.T) {
	p := loadProject(t)
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != "bind" || v.Source == publicKeyFile {
				continue
			}
			t.Run(name+":"+v.Target, func(t *testing.T) {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("mounted source %s: %v", v.Source, err)
				}
			})
		}
	}
}

// mountSource returns the host path a service mounts at target.
func mountSource(t *testing.T, service, target string) string {
	t.Helper()
	s := mustService(t, loadProject(t), service)
	for _, v := range s.Volumes {
		if v.Type == "bind" && v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("%s mounts nothing at %s", service, target)
	return ""
}

// readYAML decodes the YAML file at path into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestComposePrometheusScrapesEveryService: each service's /metrics, at
// the port it listens on, is a target of the mounted prometheus.yml.
func TestComposePrometheusScrapesEveryService(t *testing.T) {
	p := loadProject(t)
	var cfg struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, mountSource(t, prometheusService, "/etc/prometheus/prometheus.yml"), &cfg)
	var targets []string
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	want := []string{}
	for _, svc := range services {
		want = append(want, svc.name)
	}
	if _, ok := p.Services[trackerService]; ok {
		want = append(want, trackerService)
	}
	for _, name := range want {
		t.Run(name, func(t *testing.T) {
			target := net.JoinHostPort(name, strconv.Itoa(addrPort(t, env(t, mustService(t, p, name))["HTTP_ADDR"])))
			if !slices.Contains(targets, target) {
				t.Errorf("prometheus.yml does not scrape %s (targets %v)", target, targets)
			}
		})
	}
}

// TestComposeServicesExportTraces: each service sends its spans to Jaeger's
// OTLP/HTTP port under its own name.
func TestComposeServicesExportTraces(t *testing.T) {
	p := loadProject(t)
	mustService(t, p, jaegerService)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			e := env(t, mustService(t, p, svc.name))
			u, err := url.Parse(e["OTEL_EXPORTER_OTLP_ENDPOINT"])
			if err != nil {
				t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT: %v", err)
			}
			if u.Scheme != "http" || u.Hostname() != jaegerService || u.Port() != jaegerOTLPHTTP {
				t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %s, want http://%s:%s", u, jaegerService, jaegerOTLPHTTP)
			}
			if e["OTEL_SERVICE_NAME"] != svc.name {
				t.Errorf("OTEL_SERVICE_NAME = %q, want %q", e["OTEL_SERVICE_NAME"], svc.name)
			}
		})
	}
}

// grafanaDatasources reads the provisioned datasources.
func grafanaDatasources(t *testing.T) map[string]string {
	t.Helper()
	dir := mountSource(t, grafanaService, "/etc/grafana/provisioning/datasources")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no datasource files in %s", dir)
	}
	uids := map[string]string{} // uid → url
	for _, f := range files {
		var cfg struct {
			Datasources []struct {
				UID  string `yaml:"uid"`
				Type string `yaml:"type"`
				URL  string `yaml:"url"`
			} `yaml:"datasources"`
		}
		readYAML(t, f, &cfg)
		for _, d := range cfg.Datasources {
			uids[d.UID] = d.URL
		}
	}
	return uids
}

func TestComposeGrafanaDatasourceIsPrometheus(t *testing.T) {
	p := loadProject(t)
	prom := mustService(t, p, prometheusService)
	port := strconv.Itoa(int(prom.Ports[0].Target))
	for uid, raw := range grafanaDatasources(t) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("datasource %s url: %v", uid, err)
		}
		if u.Hostname() != prometheusService || u.Port() != port {
			t.Errorf("datasource %s url = %s, want http://%s:%s", uid, raw, prometheusService, port)
		}
	}
}

// dashboard is as much of a Grafana dashboard as the checks read.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// metricName finds the metric names in PromQL.
var metricName = regexp.MustCompile(`\bchoreo_[a-zA-Z0-9_]+`)

// TestComposeDashboardQueriesRegisteredMetrics: the dashboard parses, each
// panel queries the provisioned datasource, every metric its PromQL names
// is one the code registers, and the metrics worth alerting on are shown.
func TestComposeDashboardQueriesRegisteredMetrics(t *testing.T) {
	dir := mountSource(t, grafanaService, "/var/lib/grafana/dashboards")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s", dir)
	}
	registered := registeredMetrics(t, filepath.Join(repoRoot, "pkg"), filepath.Join(repoRoot, "services"))
	datasources := grafanaDatasources(t)
	used := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || len(d.Panels) == 0 {
			t.Errorf("%s: no uid or no panels", f)
		}
		for _, panel := range d.Panels {
			if _, ok := datasources[panel.Datasource.UID]; !ok {
				t.Errorf("%s: panel %q: datasource uid %q is not provisioned", f, panel.Title, panel.Datasource.UID)
			}
			if len(panel.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, panel.Title)
			}
			for _, target := range panel.Targets {
				names := metricName.FindAllString(target.Expr, -1)
				if len(names) == 0 {
					t.Errorf("%s: panel %q: %q names no choreo_ metric", f, panel.Title, target.Expr)
				}
				for _, n := range names {
					used[n] = true
					if !registered[n] {
						t.Errorf("%s: panel %q: %s is not a metric the code registers", f, panel.Title, n)
					}
				}
			}
		}
	}
	for _, alert := range []string{
		"choreo_outbox_oldest_unsent_seconds", "choreo_consumer_lag",
		"choreo_consumer_dead_letters_total", "choreo_outbox_refused_rows",
	} {
		if !used[alert] {
			t.Errorf("no panel shows %s", alert)
		}
	}
}

// registeredMetrics finds the metrics the Go code under dirs registers:
// the Name of every prometheus.CounterOpts, GaugeOpts, HistogramOpts and
// SummaryOpts literal, plus the series a histogram or summary exposes
// (_bucket, _sum, _count).
func registeredMetrics(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				kind := sel.Sel.Name
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" || !strings.HasSuffix(kind, "Opts") {
					return true
				}
				for _, elt := range lit.Elts {
					kv, ok := elt.(*ast.KeyValueExpr)
					if key, isIdent := kv.Key.(*ast.Ident); !ok || !isIdent || key.Name != "Name" {
						continue
					}
					s, ok := kv.Value.(*ast.BasicLit)
					if !ok || s.Kind != token.STRING {
						continue
					}
					name, _ := strconv.Unquote(s.Value)
					names[name] = true
					if kind == "HistogramOpts" || kind == "SummaryOpts" {
						for _, suffix := range []string{"_bucket", "_sum", "_count"} {
							names[name+suffix] = true
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("scan %s: %v", dir, err)
		}
	}
	if len(names) == 0 {
		t.Fatal("found no registered metrics")
	}
	return names
}
