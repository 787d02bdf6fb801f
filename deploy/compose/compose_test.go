// Package compose_test checks deploy/compose/compose.yaml and
// deploy/Dockerfile without a Docker engine: it loads the compose file the
// way `docker compose` does (compose-go, schema validation included) and
// holds it against the services' own Config structs, so that a renamed
// variable, a changed default port or a wrong database fails here rather
// than at `docker compose up`.
package compose_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/tracing"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/tracker"
)

// repoRoot is the module root relative to this package; compose.yaml's
// build contexts must point at it.
const repoRoot = "../.."

// kafkaService is the compose service of the broker.
const kafkaService = "kafka"

// services are the four services and the tracker with their defaults: the shared part
// (base) and a fresh *Config, whose envconfig tags say which variables it
// reads.
var services = []struct {
	name   string
	base   participant.Config
	config func() any
}{
	{order.Name, order.DefaultConfig().Config, func() any { c := order.DefaultConfig(); return &c }},
	{payment.Name, payment.DefaultConfig().Config, func() any { c := payment.DefaultConfig(); return &c }},
	{inventory.Name, inventory.DefaultConfig().Config, func() any { c := inventory.DefaultConfig(); return &c }},
	{shipping.Name, shipping.DefaultConfig().Config, func() any { c := shipping.DefaultConfig(); return &c }},
	{tracker.Name, tracker.DefaultConfig().Config, func() any { c := tracker.DefaultConfig(); return &c }},
}

// dbService names the database container of a service.
func dbService(name string) string { return name + "-db" }

var (
	projectOnce sync.Once
	project     *types.Project
	projectErr  error
)

// publicKeyFile is the CHOREO_PUBLIC_KEY_FILE the tests load compose.yaml
// with: the file requires one, as make up passes it.
const publicKeyFile = "/home/dev/.cache/choreo/dev-key/public.pem"

// loadProject loads compose.yaml once, as `docker compose config` would:
// schema validation, interpolation, normalisation, consistency checks and
// paths resolved against the file's directory. The process environment is
// deliberately not used, so the result does not depend on who runs the
// test; only CHOREO_PUBLIC_KEY_FILE is set, to publicKeyFile.
func loadProject(t *testing.T) *types.Project {
	t.Helper()
	projectOnce.Do(func() {
		project, projectErr = load("CHOREO_PUBLIC_KEY_FILE=" + publicKeyFile)
	})
	if projectErr != nil {
		t.Fatalf("load compose.yaml: %v", projectErr)
	}
	return project
}

// load loads compose.yaml with only env as its environment.
func load(env ...string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."),
		cli.WithResolvedPaths(true),
		cli.WithEnv(env),
	)
	if err != nil {
		return nil, fmt.Errorf("project options: %w", err)
	}
	return opts.LoadProject(context.Background())
}

// TestComposeVerifiesTokensWithTheGivenKey: the stack does not start
// without a token key, so no service serves its API to anyone who asks;
// with one, every service mounts it read-only where AUTH_PUBLIC_KEY_FILE
// points and takes the development tokens' issuer and audience, so
// choreoctl token signs what the stack accepts. Authentication is on.
func TestComposeVerifiesTokensWithTheGivenKey(t *testing.T) {
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "CHOREO_PUBLIC_KEY_FILE") {
		t.Fatalf("load without CHOREO_PUBLIC_KEY_FILE = %v, want an error naming it", err)
	}
	p := loadProject(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			e := env(t, s)
			want := map[string]string{"AUTH_ISSUER": devkey.Issuer, "AUTH_AUDIENCE": devkey.Audience, "AUTH_DISABLED": "false", "AUTH_JWKS_URL": ""}
			for k, v := range want {
				if e[k] != v {
					t.Errorf("%s = %q, want %q", k, e[k], v)
				}
			}
			i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == e["AUTH_PUBLIC_KEY_FILE"] })
			switch {
			case e["AUTH_PUBLIC_KEY_FILE"] == "" || i < 0:
				t.Fatalf("AUTH_PUBLIC_KEY_FILE = %q, which no volume mounts", e["AUTH_PUBLIC_KEY_FILE"])
			case s.Volumes[i].Type != types.VolumeTypeBind || s.Volumes[i].Source != publicKeyFile:
				t.Errorf("%s is mounted from %s %q, want a bind of CHOREO_PUBLIC_KEY_FILE %q", s.Volumes[i].Target, s.Volumes[i].Type, s.Volumes[i].Source, publicKeyFile)
			case !s.Volumes[i].ReadOnly:
				t.Errorf("%s is mounted writable, want read-only", s.Volumes[i].Target)
			}
		})
	}
}

// mustService returns the named compose service, failing the test when the
// file has none.
func mustService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("compose.yaml has no service %q", name)
	}
	return s
}

// env returns a service's environment as plain strings; a variable without
// a value (passed through from the host) is reported, since the stack must
// not depend on the caller's environment.
func env(t *testing.T, s types.ServiceConfig) map[string]string {
	t.Helper()
	m := map[string]string{}
	for k, v := range s.Environment {
		if v == nil {
			t.Errorf("%s: %s has no value (it would come from the host's environment)", s.Name, k)
			continue
		}
		m[k] = *v
	}
	return m
}

// configVars lists the variables a *Config reads, from its envconfig tags,
// the way envconfig.Process("", cfg) does: the envconfig tag names the
// variable, a field without one is read under its upper-cased name,
// ignored:"true" fields are not read at all, an embedded struct (the
// runtime's participant.Config) is read as if its fields were the outer
// struct's, and a named struct field (participant.Config.Kafka, tag KAFKA;
// Auth, tag AUTH) prefixes its fields' names with its own and an
// underscore. Only the names
// come from the tags; defaults come from DefaultConfig.
func configVars(t *testing.T, cfg any) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Tag.Get("ignored") == "true" {
				continue
			}
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix)
				continue
			}
			key := f.Tag.Get("envconfig")
			if key == "" {
				key = strings.ToUpper(f.Name)
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+key+"_")
				continue
			}
			vars[prefix+key] = true
		}
	}
	walk(reflect.TypeOf(cfg).Elem(), "")
	if len(vars) == 0 {
		t.Fatalf("%T reads no variables", cfg)
	}
	return vars
}

// addrPort is the port of a host:port address.
func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: port: %v", addr, err)
	}
	return n
}

func TestComposeFileIsValid(t *testing.T) {
	p := loadProject(t)
	if p.Name != "choreo" {
		t.Errorf("project name = %q, want choreo (volumes and networks are named after it)", p.Name)
	}
	want := []string{kafkaService}
	for _, svc := range services {
		want = append(want, svc.name, dbService(svc.name))
	}
	for _, name := range want {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("missing service %q", name)
		}
	}
}

func TestComposeServiceEnvironment(t *testing.T) {
	p := loadProject(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			got := env(t, s)
			cfg := svc.config()
			vars := configVars(t, cfg)
			// Main reads the tracing variables apart from Config.
			maps.Copy(vars, configVars(t, &tracing.Config{}))
			for k := range got {
				if !vars[k] {
					t.Errorf("environment sets %s, which %T does not read", k, cfg)
				}
			}
			// Every variable is set explicitly, defaults included, so the
			// file documents the whole configuration.
			for k := range vars {
				if _, ok := got[k]; !ok {
					t.Errorf("environment does not set %s, which %T reads", k, cfg)
				}
			}
			// The service's own validation accepts the values.
			for k, v := range got {
				t.Setenv(k, v)
			}
			if err := envconfig.Process("", cfg); err != nil {
				t.Fatalf("envconfig: %v", err)
			}
			v, ok := cfg.(interface{ Validate() error })
			if !ok {
				t.Fatalf("%T has no Validate method", cfg)
			}
			if err := v.Validate(); err != nil {
				t.Errorf("%T.Validate() with the compose environment: %v", cfg, err)
			}
		})
	}
}

func TestComposeDatabaseURL(t *testing.T) {
	p := loadProject(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			raw := env(t, mustService(t, p, svc.name))["DATABASE_URL"]
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("DATABASE_URL %q: %v", raw, err)
			}
			if u.Scheme != "postgres" && u.Scheme != "postgresql" {
				t.Errorf("DATABASE_URL scheme = %q, want postgres", u.Scheme)
			}
			want := dbService(svc.name)
			if u.Hostname() != want {
				t.Fatalf("DATABASE_URL host = %q, want the service's own database %q", u.Hostname(), want)
			}
			if port := u.Port(); port != "" && port != "5432" {
				t.Errorf("DATABASE_URL port = %s, want 5432 (PostgreSQL's port inside the network)", port)
			}
			dbEnv := env(t, mustService(t, p, want))
			if db := strings.TrimPrefix(u.Path, "/"); db == "" || db != dbEnv["POSTGRES_DB"] {
				t.Errorf("DATABASE_URL database = %q, but %s creates POSTGRES_DB=%q", db, want, dbEnv["POSTGRES_DB"])
			}
			if user := u.User.Username(); user != dbEnv["POSTGRES_USER"] {
				t.Errorf("DATABASE_URL user = %q, but %s creates POSTGRES_USER=%q", user, want, dbEnv["POSTGRES_USER"])
			}
			if pw, _ := u.User.Password(); pw != dbEnv["POSTGRES_PASSWORD"] {
				t.Errorf("DATABASE_URL password does not match %s's POSTGRES_PASSWORD", want)
			}
			if mode := u.Query().Get("sslmode"); mode != "disable" {
				t.Errorf("DATABASE_URL sslmode = %q, want disable (the postgres image serves no TLS)", mode)
			}
		})
	}
}

func TestComposeDatabases(t *testing.T) {
	p := loadProject(t)
	volumeOwner := map[string]string{}
	for _, svc := range services {
		name := dbService(svc.name)
		t.Run(name, func(t *testing.T) {
			s := mustService(t, p, name)
			if !strings.HasPrefix(s.Image, "postgres:") || s.Image == "postgres:latest" {
				t.Errorf("image = %q, want a pinned postgres:<version>", s.Image)
			}
			e := env(t, s)
			for _, k := range []string{"POSTGRES_DB", "POSTGRES_USER", "POSTGRES_PASSWORD"} {
				if e[k] == "" {
					t.Errorf("%s is not set", k)
				}
			}
			if s.HealthCheck == nil || !slices.ContainsFunc(s.HealthCheck.Test, func(a string) bool {
				return strings.Contains(a, "pg_isready")
			}) {
				t.Errorf("healthcheck does not run pg_isready")
			}
			var data *types.ServiceVolumeConfig
			for i, v := range s.Volumes {
				if v.Target == "/var/lib/postgresql/data" {
					data = &s.Volumes[i]
				}
			}
			switch {
			case data == nil:
				t.Errorf("no volume at /var/lib/postgresql/data: data would not survive `docker compose down`")
			case data.Type != types.VolumeTypeVolume:
				t.Errorf("data volume type = %q, want a named volume", data.Type)
			case volumeOwner[data.Source] != "":
				t.Errorf("volume %q is shared with %s", data.Source, volumeOwner[data.Source])
			default:
				volumeOwner[data.Source] = name
				if _, ok := p.Volumes[data.Source]; !ok {
					t.Errorf("volume %q is not declared", data.Source)
				}
			}
		})
	}
}

func TestComposeKafka(t *testing.T) {
	p := loadProject(t)
	s := mustService(t, p, kafkaService)
	if !strings.HasPrefix(s.Image, "apache/kafka:4.") {
		t.Errorf("image = %q, want a pinned apache/kafka:4.x", s.Image)
	}
	e := env(t, s)
	tests := []struct {
		key, want string
	}{
		{"KAFKA_PROCESS_ROLES", "broker,controller"},
		{"KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false"},
		{"KAFKA_NUM_PARTITIONS", strconv.Itoa(broker.Partitions)},
		{"KAFKA_DEFAULT_REPLICATION_FACTOR", "1"},
		{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"},
		{"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1"},
		{"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"},
		// The controller listens on the container's loopback address only.
		{"KAFKA_CONTROLLER_QUORUM_VOTERS", e["KAFKA_NODE_ID"] + "@127.0.0.1:9093"},
		// Every listener authenticates, and nothing is allowed without an ACL.
		{"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT"},
		{"KAFKA_SASL_ENABLED_MECHANISMS", broker.SCRAMSHA512},
		{"KAFKA_AUTHORIZER_CLASS_NAME", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
		{"KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "false"},
		{"KAFKA_SUPER_USERS", "User:admin;User:controller"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := e[tt.key]; got != tt.want {
				t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	t.Run("host listener is published", func(t *testing.T) {
		adv := listeners(t, e["KAFKA_ADVERTISED_LISTENERS"])
		ext, ok := adv["EXTERNAL"]
		if !ok {
			t.Fatalf("no EXTERNAL advertised listener for host tools")
		}
		port := addrPort(t, ext)
		if !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool {
			return int(pc.Target) == port && pc.Published == strconv.Itoa(port) && pc.HostIP == "127.0.0.1"
		}) {
			t.Errorf("EXTERNAL listener %s is not published on the host's loopback as 127.0.0.1:%d:%d", ext, port, port)
		}
	})
	if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
		t.Errorf("kafka has no healthcheck")
	}
}

// listeners parses a Kafka listener list, NAME://host:port,…, into name →
// host:port.
func listeners(t *testing.T, list string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for l := range strings.SplitSeq(list, ",") {
		name, addr, ok := strings.Cut(l, "://")
		if !ok {
			t.Fatalf("listener %q: want NAME://host:port", l)
		}
		m[name] = addr
	}
	return m
}

func TestComposeKafkaBrokers(t *testing.T) {
	p := loadProject(t)
	kafka := mustService(t, p, kafkaService)
	advertised := listeners(t, env(t, kafka)["KAFKA_ADVERTISED_LISTENERS"])
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			raw := env(t, mustService(t, p, svc.name))["KAFKA_BROKERS"]
			for b := range strings.SplitSeq(raw, ",") {
				host, _, err := net.SplitHostPort(b)
				if err != nil {
					t.Fatalf("KAFKA_BROKERS entry %q: %v", b, err)
				}
				if host != kafkaService {
					t.Errorf("KAFKA_BROKERS entry %q: host is not the %s service", b, kafkaService)
				}
				// The broker hands clients its advertised address, so the
				// bootstrap address must be one of them or every connection
				// after the first would go elsewhere.
				if !slices.Contains(mapValues(advertised), b) {
					t.Errorf("KAFKA_BROKERS entry %q is not an advertised listener of kafka (%v)", b, advertised)
				}
			}
		})
	}
}

func mapValues(m map[string]string) []string {
	var vs []string
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

func TestComposePorts(t *testing.T) {
	p := loadProject(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			want := addrPort(t, svc.base.HTTPAddr)
			listen := addrPort(t, env(t, s)["HTTP_ADDR"])
			if listen != want {
				t.Errorf("HTTP_ADDR port = %d, want the Config default %d (the Dockerfile EXPOSEs it)", listen, want)
			}
			if len(s.Ports) != 1 {
				t.Fatalf("ports = %v, want exactly one", s.Ports)
			}
			pc := s.Ports[0]
			if int(pc.Target) != listen {
				t.Errorf("container port = %d, but the service listens on %d", pc.Target, listen)
			}
			if pc.Published != strconv.Itoa(want) {
				t.Errorf("published port = %q, want the Config default %d", pc.Published, want)
			}
			// A local stack: reachable from this machine only.
			if pc.HostIP != "127.0.0.1" {
				t.Errorf("published on %q, want 127.0.0.1 only", pc.HostIP)
			}
		})
	}
}

func TestComposeDependsOn(t *testing.T) {
	p := loadProject(t)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			for _, dep := range []string{dbService(svc.name), kafkaService} {
				d, ok := s.DependsOn[dep]
				switch {
				case !ok:
					t.Errorf("does not depend on %s", dep)
				case d.Condition != types.ServiceConditionHealthy:
					t.Errorf("depends on %s with condition %q, want %s", dep, d.Condition, types.ServiceConditionHealthy)
				}
			}
		})
	}
}

func TestComposeHealthchecksAndRestart(t *testing.T) {
	p := loadProject(t)
	for name, s := range p.Services {
		if jobs[name] {
			continue // runs once and exits; see TestComposeKafkaUsers
		}
		t.Run(name, func(t *testing.T) {
			hc := s.HealthCheck
			if hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
				t.Errorf("no healthcheck: depends_on service_healthy cannot wait for it")
			}
			if s.Restart == "" || s.Restart == types.RestartPolicyNo {
				t.Errorf("restart = %q, want a restart policy", s.Restart)
			}
		})
	}
	for _, svc := range services {
		t.Run(svc.name+"/readyz", func(t *testing.T) {
			s := mustService(t, p, svc.name)
			if s.HealthCheck == nil {
				t.Fatal("no healthcheck")
			}
			test := s.HealthCheck.Test
			if len(test) != 3 || test[0] != "CMD" || test[1] != "/healthcheck" {
				t.Fatalf("healthcheck test = %q, want [CMD /healthcheck http://127.0.0.1:<port>/readyz]", test)
			}
			u, err := url.Parse(test[2])
			if err != nil {
				t.Fatalf("healthcheck URL: %v", err)
			}
			listen := addrPort(t, env(t, s)["HTTP_ADDR"])
			if u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(listen) || u.Path != "/readyz" {
				t.Errorf("healthcheck URL = %s, want http://127.0.0.1:%d/readyz", u, listen)
			}
		})
	}
}

func TestComposeBuildsEachServiceImage(t *testing.T) {
	p := loadProject(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			b := s.Build
			if b == nil {
				t.Fatal("no build section")
			}
			if b.Context != root {
				t.Errorf("build context = %s, want the repository root %s", b.Context, root)
			}
			if arg := b.Args["SERVICE"]; arg == nil || *arg != svc.name {
				t.Errorf("build arg SERVICE is not %q", svc.name)
			}
			df := parseDockerfile(t, filepath.Join(b.Context, b.Dockerfile))
			st := df.last
			if b.Target != "" {
				st = df.stages[b.Target]
			}
			if st == nil {
				t.Fatalf("%s has no stage `FROM … AS %s`", b.Dockerfile, b.Target)
			}
			chain := withArgs(df.chain(st), b.Args)

			// The image runs the binary copied from /out/<name> of a build
			// stage whose `go build -o /out/` compiles services/<name>/cmd/<name>.
			from, bin, ok := copiedFrom(chain, "/out/"+svc.name)
			if !ok {
				t.Fatalf("stage %s does not COPY --from=<build stage> /out/%s", st.name, svc.name)
			}
			if ep := lastArgs(chain, "ENTRYPOINT"); !slices.Equal(jsonArgs(t, ep), []string{bin}) {
				t.Errorf("ENTRYPOINT = %s, want [%q]", ep, bin)
			}
			build, ok := df.stages[from]
			if !ok {
				t.Fatalf("COPY --from=%s: no such stage", from)
			}
			pkg := "./services/" + svc.name + "/cmd/" + svc.name
			if !builds(t, df.chain(build), "/out/", pkg) {
				t.Errorf("stage %s does not `go build -o /out/ … %s`", from, pkg)
			}
			if !isMainPackage(t, filepath.Join(root, pkg)) {
				t.Errorf("%s is not a main package", pkg)
			}

			// The compose healthcheck runs /healthcheck, so the image has it.
			hcFrom, hc, ok := copiedFrom(chain, "/out/healthcheck")
			if !ok || hc != "/healthcheck" {
				t.Errorf("stage %s does not COPY /healthcheck into the image", st.name)
			} else if !builds(t, df.chain(df.stages[hcFrom]), "/out/", "./deploy/healthcheck") {
				t.Errorf("stage %s does not build ./deploy/healthcheck", hcFrom)
			}

			port := strconv.Itoa(addrPort(t, svc.base.HTTPAddr))
			if !slices.ContainsFunc(all(chain, "EXPOSE"), func(a string) bool {
				return slices.Contains(strings.Fields(a), port) || slices.Contains(strings.Fields(a), port+"/tcp")
			}) {
				t.Errorf("stage %s does not EXPOSE %s", st.name, port)
			}
		})
	}
}

func TestComposeDockerfileToolchain(t *testing.T) {
	df := parseDockerfile(t, filepath.Join(repoRoot, "deploy", "Dockerfile"))
	goVersion := goDirective(t)
	var golang []*stage
	for _, st := range df.stages {
		if strings.HasPrefix(st.base, "golang:") {
			golang = append(golang, st)
		}
	}
	if len(golang) == 0 {
		t.Fatal("no stage is FROM golang:<version>")
	}
	for _, st := range golang {
		tag := strings.TrimPrefix(st.base, "golang:")
		version, _, _ := strings.Cut(tag, "-") // golang:1.26.8-bookworm
		// The golang images set GOTOOLCHAIN=local: an image older than
		// go.mod's go directive cannot build the module. A floating
		// major.minor tag is newest-of-line, so it is accepted too.
		if version != goVersion && !strings.HasPrefix(goVersion, version+".") {
			t.Errorf("stage %s: %s does not match go.mod's go %s", st.name, st.base, goVersion)
		}
		if !slices.ContainsFunc(df.chain(st), func(in instruction) bool {
			return (in.cmd == "ENV" || in.cmd == "RUN") && strings.Contains(in.args, "CGO_ENABLED=0")
		}) {
			t.Errorf("stage %s does not build with CGO_ENABLED=0: distroless/static has no libc", st.name)
		}
	}
}

// goDirective reads the go version from go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go directive")
	return ""
}

// isMainPackage reports whether dir holds a Go file of package main.
func isMainPackage(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return false
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.TrimSpace(line) == "package main" {
				return true
			}
		}
	}
	return false
}

// A Dockerfile, parsed only as far as these tests need: stages and their
// instructions, line continuations joined, comments dropped.
type dockerfile struct {
	args   map[string]string // ARGs declared before the first FROM
	stages map[string]*stage
	last   *stage // what a build without --target makes
}

type stage struct {
	name   string
	base   string // the FROM image or stage name, build args expanded
	instrs []instruction
}

type instruction struct {
	cmd  string // upper case, e.g. "RUN"
	args string
}

func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	var lines []string
	var cur strings.Builder
	for raw := range strings.SplitSeq(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	df := &dockerfile{args: map[string]string{}, stages: map[string]*stage{}}
	var st *stage
	for i, line := range lines {
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "ARG" && st == nil:
			for _, a := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(a, "=")
				df.args[k] = v
			}
		case in.cmd == "FROM":
			var words []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					words = append(words, w)
				}
			}
			st = &stage{name: strconv.Itoa(i)}
			switch {
			case len(words) == 1:
			case len(words) == 3 && strings.EqualFold(words[1], "AS"):
				st.name = strings.ToLower(words[2])
			default:
				t.Fatalf("%s: cannot parse FROM %s", path, in.args)
			}
			st.base = os.Expand(words[0], func(k string) string { return df.args[k] })
			if _, dup := df.stages[st.name]; dup {
				t.Fatalf("%s: stage %q declared twice", path, st.name)
			}
			df.stages[st.name] = st
			df.last = st
		case st == nil:
			t.Fatalf("%s: %s before the first FROM", path, in.cmd)
		default:
			st.instrs = append(st.instrs, in)
		}
	}
	return df
}

// chain returns the instructions of st and of the stages it is built FROM,
// base first: what the final image inherits.
func (df *dockerfile) chain(st *stage) []instruction {
	if st == nil {
		return nil
	}
	var ins []instruction
	if base, ok := df.stages[st.base]; ok && base != st {
		ins = df.chain(base)
	}
	return append(ins, st.instrs...)
}

// all returns the arguments of every cmd instruction in ins.
func all(ins []instruction, cmd string) []string {
	var out []string
	for _, in := range ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// lastArgs returns the arguments of the last cmd instruction, the one in
// effect.
func lastArgs(ins []instruction, cmd string) string {
	a := all(ins, cmd)
	if len(a) == 0 {
		return ""
	}
	return a[len(a)-1]
}

// jsonArgs decodes an exec-form argument list such as ["/order"].
func jsonArgs(t *testing.T, s string) []string {
	t.Helper()
	var a []string
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Errorf("%s is not in exec form: %v", s, err)
	}
	return a
}

// copiedFrom finds `COPY --from=<stage> src <dst>` in ins and returns the
// stage and dst.
func copiedFrom(ins []instruction, src string) (from, dst string, ok bool) {
	for _, in := range ins {
		if in.cmd != "COPY" {
			continue
		}
		from = ""
		var paths []string
		for _, w := range strings.Fields(in.args) {
			if v, ok := strings.CutPrefix(w, "--from="); ok {
				from = v
			} else if !strings.HasPrefix(w, "--") {
				paths = append(paths, w)
			}
		}
		if from != "" && len(paths) == 2 && paths[0] == src {
			return from, paths[1], true
		}
	}
	return "", "", false
}

// withArgs returns ins with the build arguments expanded as Docker does:
// an ARG the stages declare takes the value compose passes (args), or else
// its default; references to anything else are left as they are.
func withArgs(ins []instruction, args types.MappingWithEquals) []instruction {
	vars := map[string]string{}
	out := make([]instruction, 0, len(ins))
	for _, in := range ins {
		if in.cmd == "ARG" {
			for _, a := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(a, "=")
				if given, ok := args[k]; ok && given != nil {
					v = *given
				}
				vars[k] = v
			}
		}
		in.args = os.Expand(in.args, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return "${" + k + "}"
		})
		out = append(out, in)
	}
	return out
}

// builds reports whether a RUN in ins runs `go build` with -o outDir and pkg
// among its packages.
func builds(t *testing.T, ins []instruction, outDir, pkg string) bool {
	t.Helper()
	for _, run := range all(ins, "RUN") {
		for cmd := range strings.SplitSeq(run, "&&") {
			words := strings.Fields(cmd)
			i := slices.Index(words, "go")
			if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
				continue
			}
			args := words[i+2:]
			o := slices.Index(args, "-o")
			if o < 0 || o+1 >= len(args) || args[o+1] != outDir {
				continue
			}
			if slices.Contains(args, pkg) {
				return true
			}
		}
	}
	return false
}

// jobs are the compose services that run once, before the others: they
// have no healthcheck, and the others wait for them to complete.
var jobs = map[string]bool{"kafka-users": true, "kafka-setup": true}

// TestComposeKafkaUsers: each service logs in to Kafka as its own user,
// with a password only it mounts (the kafka-users volume, one directory per
// user), after kafka-setup has applied the ACLs as the administrator.
func TestComposeKafkaUsers(t *testing.T) {
	p := loadProject(t)
	mountOf := func(t *testing.T, s types.ServiceConfig, target string) types.ServiceVolumeConfig {
		t.Helper()
		for _, v := range s.Volumes {
			if v.Target == target {
				return v
			}
		}
		t.Fatalf("%s mounts nothing at %s", s.Name, target)
		return types.ServiceVolumeConfig{}
	}
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			s := mustService(t, p, svc.name)
			e := env(t, s)
			if e["KAFKA_USERNAME"] != svc.name || e["KAFKA_INSECURE"] != "false" {
				t.Errorf("KAFKA_USERNAME = %q, KAFKA_INSECURE = %q; want %q, false", e["KAFKA_USERNAME"], e["KAFKA_INSECURE"], svc.name)
			}
			if _, ok := kafkaacl.Find(svc.name); !ok {
				t.Errorf("no Grant for Kafka user %s", svc.name)
			}
			dir, _ := filepath.Split(e["KAFKA_PASSWORD_FILE"])
			v := mountOf(t, s, filepath.Clean(dir))
			if v.Source != "kafka-users" || !v.ReadOnly || v.Volume == nil || v.Volume.Subpath != svc.name {
				t.Errorf("mount at %s = %+v, want kafka-users' subpath %s, read-only", dir, v, svc.name)
			}
			if d, ok := s.DependsOn["kafka-setup"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("does not wait for kafka-setup to complete: %+v", s.DependsOn)
			}
		})
	}
	t.Run("kafka-setup", func(t *testing.T) {
		s := mustService(t, p, "kafka-setup")
		if !slices.Equal(s.Entrypoint, types.ShellCommand{"/choreoctl", "kafka-acls"}) {
			t.Errorf("entrypoint = %q, want [/choreoctl kafka-acls]", s.Entrypoint)
		}
		e := env(t, s)
		dir, _ := filepath.Split(e["KAFKA_PASSWORD_FILE"])
		if v := mountOf(t, s, filepath.Clean(dir)); e["KAFKA_USERNAME"] != "admin" || v.Volume == nil || v.Volume.Subpath != "admin" {
			t.Errorf("kafka-setup logs in as %q with the mount %+v, want admin's", e["KAFKA_USERNAME"], v)
		}
	})
	t.Run("kafka-users", func(t *testing.T) {
		script, err := os.ReadFile(mountSource(t, "kafka-users", "/choreo/users.sh"))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range append([]string{"admin", "controller"}, kafkaacl.Users()...) {
			if !strings.Contains(string(script), " "+u) {
				t.Errorf("users.sh creates no password for %s", u)
			}
		}
	})
}
