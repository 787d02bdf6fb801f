package compose_test

import (
	"bufio"
	"context"
	"encoding/xml"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// The debezium profile's services.
const (
	debeziumProfile = "debezium"
	connectService  = "connect"
	registerService = "connect-register"
)

// Where the connect service mounts its files (compose.yaml).
const (
	workerTarget = "/choreo/worker.properties"
	startTarget  = "/choreo/start.sh"
)

// loadDebezium loads compose.yaml as the README runs the profile:
// OUTBOX_RELAY=debezium docker compose --profile debezium up.
func loadDebezium(t *testing.T) *types.Project {
	t.Helper()
	debeziumOnce.Do(func() {
		var opts *cli.ProjectOptions
		opts, debeziumErr = cli.NewProjectOptions([]string{"compose.yaml"},
			cli.WithWorkingDirectory("."),
			cli.WithResolvedPaths(true),
			cli.WithEnv([]string{"CHOREO_PUBLIC_KEY_FILE=" + publicKeyFile, "OUTBOX_RELAY=" + outbox.RelayDebezium}),
			cli.WithProfiles([]string{debeziumProfile}),
		)
		if debeziumErr == nil {
			debeziumProject, debeziumErr = opts.LoadProject(context.Background())
		}
	})
	if debeziumErr != nil {
		t.Fatalf("load compose.yaml with the debezium profile: %v", debeziumErr)
	}
	return debeziumProject
}

var (
	debeziumOnce    sync.Once
	debeziumProject *types.Project
	debeziumErr     error
)

// outboxServices are the services with an outbox, the ones Debezium
// publishes for (the tracker has none).
func outboxServices() []string {
	var names []string
	for _, svc := range services {
		if svc.name != "tracker" {
			names = append(names, svc.name)
		}
	}
	return names
}

// TestComposeDebeziumProfile: without the profile the stack is what it was,
// every service on its built-in relay and no worker; with the profile and
// OUTBOX_RELAY=debezium the worker and connect-register join, every
// service reads the switch, and a service with an outbox starts only after
// its connector is registered.
func TestComposeDebeziumProfile(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		p := loadProject(t)
		for _, name := range []string{connectService, registerService} {
			if _, ok := p.Services[name]; ok {
				t.Errorf("%s runs without the %s profile", name, debeziumProfile)
			}
			if s, ok := p.DisabledServices[name]; !ok || !slices.Equal(s.Profiles, []string{debeziumProfile}) {
				t.Errorf("%s is not a service of the %s profile alone", name, debeziumProfile)
			}
		}
		for _, svc := range services {
			if got := env(t, mustService(t, p, svc.name))["OUTBOX_RELAY"]; got != outbox.RelayBuiltin {
				t.Errorf("%s: OUTBOX_RELAY = %q without OUTBOX_RELAY set, want %q", svc.name, got, outbox.RelayBuiltin)
			}
		}
	})
	t.Run("on", func(t *testing.T) {
		p := loadDebezium(t)
		for _, name := range []string{connectService, registerService} {
			if s, ok := p.Services[name]; !ok || !slices.Equal(s.Profiles, []string{debeziumProfile}) {
				t.Errorf("%s is not a service of the %s profile alone", name, debeziumProfile)
			}
		}
		for _, svc := range services {
			if got := env(t, mustService(t, p, svc.name))["OUTBOX_RELAY"]; got != outbox.RelayDebezium {
				t.Errorf("%s: OUTBOX_RELAY = %q, want the caller's %q", svc.name, got, outbox.RelayDebezium)
			}
		}
		// start.sh refuses anything but debezium: it must see the switch.
		if got := env(t, mustService(t, p, connectService))["OUTBOX_RELAY"]; got != outbox.RelayDebezium {
			t.Errorf("connect: OUTBOX_RELAY = %q, want the caller's %q", got, outbox.RelayDebezium)
		}
		for _, name := range outboxServices() {
			d, ok := mustService(t, p, name).DependsOn[registerService]
			switch {
			case !ok:
				t.Errorf("%s does not wait for %s", name, registerService)
			case d.Condition != types.ServiceConditionCompletedSuccessfully:
				t.Errorf("%s waits for %s with condition %q, want %s", name, registerService, d.Condition, types.ServiceConditionCompletedSuccessfully)
			case d.Required:
				t.Errorf("%s requires %s, which the stack without the profile does not have", name, registerService)
			}
		}
	})
}

// TestComposeConnectRegister: connect-register registers one connector per
// database with an outbox, each at the address its service uses, on the
// worker the connect service runs, once both answer.
func TestComposeConnectRegister(t *testing.T) {
	p := loadDebezium(t)
	s := mustService(t, p, registerService)
	if !slices.Equal(s.Entrypoint, types.ShellCommand{"/choreoctl", "connect-register"}) {
		t.Errorf("entrypoint = %q, want [/choreoctl connect-register]", s.Entrypoint)
	}
	if s.Build == nil || s.Build.Args["SERVICE"] == nil || *s.Build.Args["SERVICE"] != "order" {
		t.Errorf("build = %+v, want order's image, which carries choreoctl", s.Build)
	}
	e := env(t, s)
	u, err := url.Parse(e["KAFKA_CONNECT_URL"])
	if err != nil {
		t.Fatalf("KAFKA_CONNECT_URL: %v", err)
	}
	if want := strconv.Itoa(listenerPort(t, workerProps(t, p))); u.Hostname() != connectService || u.Port() != want {
		t.Errorf("KAFKA_CONNECT_URL = %s, want the %s service's REST port %s", u, connectService, want)
	}
	deps := []string{connectService}
	for _, name := range outboxServices() {
		key := strings.ToUpper(name) + "_DATABASE_URL"
		if got, want := e[key], env(t, mustService(t, p, name))["DATABASE_URL"]; got != want {
			t.Errorf("%s = %q, want %s's DATABASE_URL %q", key, got, name, want)
		}
		// Its connector produces as the service's own Kafka user.
		key = strings.ToUpper(name) + "_KAFKA_PASSWORD_FILE"
		if m := mountAt(t, s, filepath.Dir(e[key])); filepath.Base(e[key]) != "password" || m.Source != "kafka-users" || m.Volume == nil || m.Volume.Subpath != name || !m.ReadOnly {
			t.Errorf("%s = %q is not the password in kafka-users' %s, mounted read-only: %+v", key, e[key], name, m)
		}
		deps = append(deps, dbService(name))
	}
	for _, dep := range deps {
		if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("does not wait for %s to be healthy: %+v", dep, s.DependsOn)
		}
	}

	worker := mustService(t, p, connectService)
	// The REST user's password is the one the worker's users file names.
	if e["KAFKA_CONNECT_USERNAME"] != "admin" {
		t.Errorf("KAFKA_CONNECT_USERNAME = %q, want admin, the worker's REST user", e["KAFKA_CONNECT_USERNAME"])
	}
	rest := mountAt(t, s, filepath.Dir(e["KAFKA_CONNECT_PASSWORD_FILE"]))
	users := restUsersFile(t, worker)
	wrest := mountAt(t, worker, filepath.Dir(users))
	if rest.Source != "kafka-users" || rest.Volume == nil || rest.Volume.Subpath != "connect-rest" || !rest.ReadOnly ||
		wrest.Source != rest.Source || wrest.Volume == nil || wrest.Volume.Subpath != rest.Volume.Subpath || !wrest.ReadOnly {
		t.Errorf("KAFKA_CONNECT_PASSWORD_FILE's mount %+v and the worker's users file's %+v are not kafka-users' connect-rest, read-only", rest, wrest)
	}
	// The connectors' secrets: written here, read by the worker at the
	// same path, which their ${file:...} references name.
	dir := e["KAFKA_CONNECT_SECRETS_DIR"]
	secrets, wsecrets := mountAt(t, s, dir), mountAt(t, worker, dir)
	if secrets.Type != types.VolumeTypeVolume || secrets.ReadOnly || wsecrets.Source != secrets.Source || !wsecrets.ReadOnly {
		t.Errorf("KAFKA_CONNECT_SECRETS_DIR %s: mounted %+v here and %+v in the worker, want one volume, written here, read there", dir, secrets, wsecrets)
	}
	if got := workerProps(t, p)["config.providers.file.param.allowed.paths"]; got != dir {
		t.Errorf("the worker's file provider reads %q, not KAFKA_CONNECT_SECRETS_DIR %q", got, dir)
	}
	for k := range e {
		known := slices.Contains([]string{"KAFKA_CONNECT_URL", "KAFKA_CONNECT_USERNAME", "KAFKA_CONNECT_PASSWORD_FILE", "KAFKA_CONNECT_SECRETS_DIR"}, k)
		for _, name := range outboxServices() {
			known = known || k == strings.ToUpper(name)+"_DATABASE_URL" || k == strings.ToUpper(name)+"_KAFKA_PASSWORD_FILE"
		}
		if !known {
			t.Errorf("sets %s, which connect-register does not read", k)
		}
	}
}

// mountAt returns what s mounts at target.
func mountAt(t *testing.T, s types.ServiceConfig, target string) types.ServiceVolumeConfig {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v
		}
	}
	t.Errorf("%s mounts nothing at %s", s.Name, target)
	return types.ServiceVolumeConfig{}
}

// restUsersFile returns the users file the worker's REST login module
// reads, from the JAAS file start.sh names.
func restUsersFile(t *testing.T, worker types.ServiceConfig) string {
	t.Helper()
	script, err := os.ReadFile(bindSource(t, worker, startTarget))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-Djava\.security\.auth\.login\.config=(\S+)`).FindStringSubmatch(string(script))
	if m == nil {
		t.Fatal("start.sh names no JAAS file for the REST API's login")
	}
	jaas, err := os.ReadFile(bindSource(t, worker, m[1]))
	if err != nil {
		t.Fatal(err)
	}
	f := regexp.MustCompile(`PropertyFileLoginModule required\s+file="([^"]+)"`).FindStringSubmatch(string(jaas))
	if f == nil {
		t.Fatalf("%s has no PropertyFileLoginModule with a users file", m[1])
	}
	return f[1]
}

// TestComposeConnectWorker: the worker answers REST on the host's loopback
// only, logs in to Kafka as connect with the password only it mounts, keeps
// its state where connect's ACLs allow, and is configured as
// scripts/infra.sh configures make run's.
func TestComposeConnectWorker(t *testing.T) {
	p := loadDebezium(t)
	s := mustService(t, p, connectService)
	w := workerProps(t, p)
	port := listenerPort(t, w)

	t.Run("ports", func(t *testing.T) {
		if len(s.Ports) == 0 {
			t.Fatal("publishes no port: host tools cannot reach the REST API")
		}
		for _, pc := range s.Ports {
			if pc.HostIP != "127.0.0.1" {
				t.Errorf("port %d published on %q, want 127.0.0.1 only", pc.Target, pc.HostIP)
			}
			if int(pc.Target) != port {
				t.Errorf("publishes container port %d, but the worker listens on %d", pc.Target, port)
			}
		}
	})
	t.Run("healthcheck", func(t *testing.T) {
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || !strings.Contains(strings.Join(s.HealthCheck.Test, " "), "/"+strconv.Itoa(port)) {
			t.Errorf("healthcheck %v does not ask the worker's port %d", s.HealthCheck, port)
		}
		if s.Restart == "" || s.Restart == types.RestartPolicyNo {
			t.Errorf("restart = %q, want a restart policy", s.Restart)
		}
	})
	t.Run("kafka", func(t *testing.T) {
		advertised := listeners(t, env(t, mustService(t, p, kafkaService))["KAFKA_ADVERTISED_LISTENERS"])
		for b := range strings.SplitSeq(w["bootstrap.servers"], ",") {
			if !slices.Contains(mapValues(advertised), b) {
				t.Errorf("bootstrap.servers %q is not an advertised listener of kafka (%v)", b, advertised)
			}
		}
		g, ok := kafkaacl.Find("connect")
		if !ok {
			t.Fatal("internal/kafkaacl has no Grant for connect")
		}
		if w["group.id"] != g.Group {
			t.Errorf("group.id = %q, want connect's group %q", w["group.id"], g.Group)
		}
		topics := []string{w["config.storage.topic"], w["offset.storage.topic"], w["status.storage.topic"]}
		if !slices.Equal(topics, kafkaacl.ConnectTopics) {
			t.Errorf("storage topics = %q, want connect's %q", topics, kafkaacl.ConnectTopics)
		}
	})
	t.Run("login", func(t *testing.T) {
		target := w["config.providers.dir.param.allowed.paths"]
		mount := mountAt(t, s, target)
		if mount.Source != "kafka-users" || !mount.ReadOnly || mount.Volume == nil || mount.Volume.Subpath != "connect" {
			t.Fatalf("mount at %s = %+v, want kafka-users' subpath connect, read-only", target, mount)
		}
		jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="connect" password="${dir:` + mount.Target + `:password}";`
		for _, client := range []string{"", "producer.", "consumer.", "admin."} {
			if got := w[client+"sasl.jaas.config"]; got != jaas {
				t.Errorf("%ssasl.jaas.config = %s, want %s", client, got, jaas)
			}
		}
		if w["config.providers.dir.class"] != "org.apache.kafka.common.config.provider.DirectoryConfigProvider" ||
			!slices.Contains(strings.Split(w["config.providers"], ","), "dir") {
			t.Errorf("the dir config provider is not DirectoryConfigProvider")
		}
	})
	t.Run("as make run's", func(t *testing.T) {
		// What differs is where the worker runs and how it finds its
		// password: the values infra.sh computes. A key one of them has and
		// the other lacks, or a fixed value they disagree on, fails here.
		infra := infraWorker(t)
		for k, v := range infra {
			got, ok := w[k]
			switch {
			case !ok:
				t.Errorf("worker.properties lacks %s, which infra.sh's worker sets (%s)", k, v)
			case k == "config.providers":
				for _, name := range strings.Split(v, ",") {
					if !slices.Contains(strings.Split(got, ","), name) {
						t.Errorf("config.providers = %q lacks %s, which infra.sh's worker has", got, name)
					}
				}
			case !strings.Contains(v, "$") && got != v:
				t.Errorf("%s = %q, but infra.sh's worker has %q", k, got, v)
			}
		}
		for k := range w {
			if _, ok := infra[k]; !ok && !strings.HasPrefix(k, "config.providers") {
				t.Errorf("worker.properties sets %s, which infra.sh's worker does not", k)
			}
		}
	})
	t.Run("start.sh", func(t *testing.T) {
		df := parseDockerfile(t, filepath.Join(s.Build.Context, s.Build.Dockerfile))
		ep := []string(s.Entrypoint)
		if ep == nil {
			ep = jsonArgs(t, lastArgs(df.chain(df.last), "ENTRYPOINT"))
		}
		if !slices.Equal(ep, []string{"bash", startTarget}) {
			t.Errorf("entrypoint = %q, want [bash %s]", ep, startTarget)
		}
		script, err := os.ReadFile(bindSource(t, s, startTarget))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(script), "org.apache.kafka.connect.cli.ConnectDistributed "+workerTarget) {
			t.Errorf("start.sh does not run ConnectDistributed with %s", workerTarget)
		}
		if !strings.Contains(string(script), `"${OUTBOX_RELAY:-}" != debezium`) {
			t.Errorf("start.sh does not refuse to start without OUTBOX_RELAY=debezium")
		}
		libs, plugins := imageDirs(t, df)
		if !strings.Contains(string(script), "-cp '"+libs+"/*'") {
			t.Errorf("start.sh's classpath is not the image's %s/*", libs)
		}
		if w["plugin.path"] != plugins {
			t.Errorf("plugin.path = %q, want the image's %s", w["plugin.path"], plugins)
		}
	})
}

// TestComposeConnectImagePinsThePomsVersions: the worker's image fetches,
// with scripts/connect/pom.xml itself, the Kafka Connect and Debezium
// versions that pom pins, onto a JRE 17.
func TestComposeConnectImagePinsThePomsVersions(t *testing.T) {
	p := loadDebezium(t)
	b := mustService(t, p, connectService).Build
	if b == nil {
		t.Fatal("connect has no build section")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if b.Context != root {
		t.Errorf("build context = %s, want the repository root %s", b.Context, root)
	}
	pom := pomProperties(t, filepath.Join(root, "scripts", "connect", "pom.xml"))
	df := parseDockerfile(t, filepath.Join(b.Context, b.Dockerfile))
	versions := map[string]string{"KAFKA_VERSION": pom["kafka.version"], "DEBEZIUM_VERSION": pom["debezium.version"]}
	for arg, want := range versions {
		if want == "" {
			t.Fatalf("pom.xml has no version for %s", arg)
		}
		if got := df.args[arg]; got != want {
			t.Errorf("Dockerfile ARG %s=%q, but pom.xml pins %q", arg, got, want)
		}
		if v, ok := b.Args[arg]; ok && (v == nil || *v != want) {
			t.Errorf("compose passes build arg %s, which overrides the pom's %q", arg, want)
		}
	}

	final := df.last
	if b.Target != "" {
		final = df.stages[b.Target]
	}
	if final == nil || !strings.HasPrefix(final.base, "eclipse-temurin:17") || !strings.HasSuffix(final.base, "-jre") {
		t.Fatalf("the image is not built FROM a pinned eclipse-temurin:17…-jre: %+v", final)
	}
	from, _, ok := copiedFrom(final.instrs, "/out/libs")
	if !ok {
		t.Fatal("the image does not COPY --from=<stage> /out/libs")
	}
	jars := df.stages[from]
	if jars == nil || !strings.HasPrefix(jars.base, "maven:") || strings.HasSuffix(jars.base, ":latest") {
		t.Fatalf("stage %s is not FROM a pinned maven image", from)
	}
	// The stage's own ARGs take the defaults declared before the first FROM.
	var run []string
	for _, r := range all(jars.instrs, "RUN") {
		run = append(run, os.Expand(r, func(k string) string { return df.args[k] }))
	}
	runs := strings.Join(run, " && ")
	pomCopy := ""
	for _, c := range all(jars.instrs, "COPY") {
		if f := strings.Fields(c); len(f) == 2 && f[0] == "scripts/connect/pom.xml" {
			pomCopy = f[1]
		}
	}
	if pomCopy == "" {
		t.Fatalf("stage %s does not COPY scripts/connect/pom.xml", from)
	}
	for _, want := range []string{
		"-f " + pomCopy + " -P worker", "-f " + pomCopy + " -P debezium",
		"-Dkafka.version=" + pom["kafka.version"], "-Ddebezium.version=" + pom["debezium.version"],
		"connect-runtime-" + pom["kafka.version"] + ".jar", "debezium-connector-postgres-" + pom["debezium.version"] + ".jar",
	} {
		if !strings.Contains(runs, want) {
			t.Errorf("stage %s does not run %q", from, want)
		}
	}
	if mvn := regexp.MustCompile(`-D(kafka|debezium)\.version=`).FindAllString(runs, -1); len(mvn) != 4 {
		t.Errorf("stage %s sets a version %d times, want twice for each of its two mvn runs", from, len(mvn))
	}
}

// TestComposePostgresLogicalDecoding: every PostgreSQL runs with
// wal_level=logical, which Debezium reads the outbox with, whichever relay
// the services use.
func TestComposePostgresLogicalDecoding(t *testing.T) {
	for _, p := range []*types.Project{loadProject(t), loadDebezium(t)} {
		n := 0
		for name, s := range p.Services {
			if !strings.HasPrefix(s.Image, "postgres:") {
				continue
			}
			n++
			i := slices.Index(s.Command, "wal_level=logical")
			if len(s.Command) == 0 || s.Command[0] != "postgres" || i < 1 || s.Command[i-1] != "-c" {
				t.Errorf("%s: command = %q, want postgres -c wal_level=logical", name, s.Command)
			}
		}
		if n != len(services) {
			t.Errorf("found %d PostgreSQL services, want one per service (%d)", n, len(services))
		}
	}
}

// worker parses the worker.properties the connect service mounts.
func workerProps(t *testing.T, p *types.Project) map[string]string {
	t.Helper()
	f, err := os.Open(bindSource(t, mustService(t, p, connectService), workerTarget))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("worker.properties: %q is not key=value", line)
		}
		if _, dup := props[k]; dup {
			t.Errorf("worker.properties sets %s twice", k)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return props
}

// infraWorker reads the worker.properties scripts/infra.sh writes for make
// run, from its heredoc: values it computes keep their $ references.
func infraWorker(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "infra.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(data), `"$CONNECT_CONF/worker.properties") <<EOF`+"\n")
	if ok {
		body, _, ok = strings.Cut(body, "\nEOF\n")
	}
	if !ok {
		t.Fatal(`scripts/infra.sh has no heredoc writing "$CONNECT_CONF/worker.properties" to compare with`)
	}
	props := map[string]string{}
	for line := range strings.SplitSeq(body, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			props[k] = v
		}
	}
	if len(props) < 10 {
		t.Fatalf("read only %d settings from infra.sh's worker.properties", len(props))
	}
	return props
}

// listenerPort is the port of the worker's one REST listener.
func listenerPort(t *testing.T, w map[string]string) int {
	t.Helper()
	u, err := url.Parse(w["listeners"])
	if err != nil || strings.Contains(w["listeners"], ",") {
		t.Fatalf("listeners = %q, want one http://host:port", w["listeners"])
	}
	return addrPort(t, u.Host)
}

// bindSource returns the host file s bind-mounts at target.
func bindSource(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("%s bind-mounts nothing at %s", s.Name, target)
	return ""
}

// imageDirs returns where the connect image puts the worker's jars and
// the plugins.
func imageDirs(t *testing.T, df *dockerfile) (libs, plugins string) {
	t.Helper()
	_, libs, okLibs := copiedFrom(df.last.instrs, "/out/libs")
	_, plugins, okPlugins := copiedFrom(df.last.instrs, "/out/plugins")
	if !okLibs || !okPlugins {
		t.Fatal("the connect image does not COPY /out/libs and /out/plugins from its build stage")
	}
	return libs, plugins
}

// pomProperties reads the <properties> of a pom.xml.
func pomProperties(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pom struct {
		Properties struct {
			Entries []struct {
				XMLName xml.Name
				Value   string `xml:",chardata"`
			} `xml:",any"`
		} `xml:"properties"`
	}
	if err := xml.Unmarshal(data, &pom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	props := map[string]string{}
	for _, e := range pom.Properties.Entries {
		props[e.XMLName.Local] = strings.TrimSpace(e.Value)
	}
	return props
}
