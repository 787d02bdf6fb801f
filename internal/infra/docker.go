package infra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/internal/kafkaacl"
	"github.com/choreo-saga/choreo/pkg/broker"
)

// The images Docker runs: the same Kafka and PostgreSQL versions as
// deploy/compose/compose.yaml and scripts/infra.sh.
const (
	DockerKafkaImage    = "apache/kafka:4.1.1"
	DockerPostgresImage = "postgres:17.6"
)

// dockerProbeTimeout bounds the check for a Docker engine, so that Discover
// falls through to embedded mode quickly on machines without one.
const dockerProbeTimeout = 2 * time.Second

// Kafka inside its container: the host reaches it on the published
// dockerKafkaPort, with SASL/SCRAM as the users of kafkaacl (the
// administrator a super user) and every request authorized against ACLs.
// The broker talks to itself on 9093 and the controller listens on 9094,
// both bound to the container's loopback address: only processes inside
// the container reach them, so they are PLAINTEXT and their ANONYMOUS
// principal is a super user. The advertised address of dockerKafkaPort is
// only known once Docker has mapped the port, so the container waits for a start
// script that the PostStart hook writes with that address (the approach of
// testcontainers' own Kafka modules).
const (
	dockerKafkaPort    = "9092/tcp"
	dockerKafkaStarter = "/tmp/choreo-kafka-start.sh"
	// dockerKafkaStarterReady is written after the script, so the container
	// never runs a script that is still being copied in.
	dockerKafkaStarterReady = dockerKafkaStarter + ".ready"
	// dockerKafkaReady is logged once the broker is unfenced and serving.
	dockerKafkaReady = `.*(Transitioning from RECOVERY to RUNNING|Kafka Server started).*`
)

// dockerKafkaEnv configures a single-node KRaft Kafka like compose.yaml
// does: 3 partitions, replication factor 1, no topic auto-creation (the
// services create their topics).
var dockerKafkaEnv = map[string]string{
	"CLUSTER_ID":                           "4L6g3nShT-eMCtK--X86sw",
	"KAFKA_NODE_ID":                        "1",
	"KAFKA_PROCESS_ROLES":                  "broker,controller",
	"KAFKA_LISTENERS":                      "CLIENT://0.0.0.0:9092,BROKER://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
	"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CLIENT:SASL_PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
	"KAFKA_LISTENER_NAME_CLIENT_SASL_ENABLED_MECHANISMS":          "SCRAM-SHA-512",
	"KAFKA_LISTENER_NAME_CLIENT_SCRAM__SHA__512_SASL_JAAS_CONFIG": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
	"KAFKA_AUTHORIZER_CLASS_NAME":                                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND":                        "false",
	"KAFKA_SUPER_USERS":                                           "User:" + kafkaAdmin + ";User:ANONYMOUS",
	"KAFKA_INTER_BROKER_LISTENER_NAME":                            "BROKER",
	"KAFKA_CONTROLLER_LISTENER_NAMES":                             "CONTROLLER",
	"KAFKA_CONTROLLER_QUORUM_VOTERS":                              "1@127.0.0.1:9094",
	"KAFKA_DEFAULT_REPLICATION_FACTOR":                            "1",
	"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                      "1",
	"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":              "1",
	"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                         "1",
	"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR":      "1",
	"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":                 "1",
	"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                             "false",
	"KAFKA_NUM_PARTITIONS":                                        fmt.Sprint(broker.Partitions),
	"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                      "0",
}

// PostgreSQL credentials of the Docker container; it listens on a random
// host port, so fixed credentials expose nothing.
const (
	dockerPGUser     = "postgres"
	dockerPGPassword = "postgres"
)

// Docker starts Kafka and PostgreSQL with testcontainers: one Kafka broker
// (apache/kafka, KRaft) and one PostgreSQL server holding a database per
// name in Databases. It returns an error wrapping ErrNoDocker, within about
// two seconds, when no Docker engine answers. Stop terminates both
// containers.
func Docker(ctx context.Context, log *slog.Logger) (*Running, error) {
	if err := dockerAnswers(ctx, os.Getenv("DOCKER_HOST")); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	log.Info("starting Kafka and PostgreSQL containers", "kafka_image", DockerKafkaImage, "postgres_image", DockerPostgresImage)
	tcLog := testcontainers.WithLogger(slogPrintf{log})

	var (
		kafka    testcontainers.Container
		pg       *postgres.PostgresContainer
		admin    broker.Conn
		pgAddr   string
		started  = time.Now()
		g, gctx  = errgroup.WithContext(ctx)
		stopBoth = func(ctx context.Context) error {
			var errs []error
			if kafka != nil {
				if err := kafka.Terminate(ctx); err != nil {
					errs = append(errs, fmt.Errorf("terminate kafka: %w", err))
				}
			}
			if pg != nil {
				if err := pg.Terminate(ctx); err != nil {
					errs = append(errs, fmt.Errorf("terminate postgres: %w", err))
				}
			}
			return errors.Join(errs...)
		}
	)
	g.Go(func() error {
		var err error
		kafka, admin, err = dockerKafka(gctx, tcLog)
		return err
	})
	g.Go(func() error {
		var err error
		pg, pgAddr, err = dockerPostgres(gctx, tcLog)
		return err
	})
	if err := g.Wait(); err != nil {
		// Terminate whatever did start, with a context of its own: ctx may
		// be the reason the start failed.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, stopBoth(stopCtx))
	}

	urls := map[string]string{}
	for _, name := range Databases {
		u := url.URL{
			Scheme:   "postgres",
			User:     url.UserPassword(dockerPGUser, dockerPGPassword),
			Host:     pgAddr,
			Path:     "/" + DatabaseName(name),
			RawQuery: "sslmode=disable",
		}
		urls[name] = u.String()
	}
	log.Info("Kafka and PostgreSQL containers ready", "brokers", admin.Brokers, "postgres", pgAddr, "took", time.Since(started).Round(time.Millisecond))
	users := map[string]broker.Conn{}
	for _, u := range kafkaacl.Users() {
		users[u] = admin.As(u, dockerKafkaPasswords[u], "")
	}
	return &Running{
		Endpoints: Endpoints{Mode: ModeDocker, Kafka: admin, Users: users, DatabaseURLs: urls},
		Stop:      stopBoth,
		// Pausing freezes the broker with its data and mapped port intact;
		// a stop and start would give it a new host port.
		StopKafka:  func(ctx context.Context) error { return pauseContainer(ctx, kafka.GetContainerID(), true) },
		StartKafka: func(ctx context.Context) error { return pauseContainer(ctx, kafka.GetContainerID(), false) },
	}, nil
}

// pauseContainer pauses (or unpauses) a container through the Docker API.
func pauseContainer(ctx context.Context, id string, pause bool) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("infra: docker client: %w", err)
	}
	defer cli.Close()
	if pause {
		_, err = cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	} else {
		_, err = cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	}
	if err != nil {
		return fmt.Errorf("infra: pause=%v container %s: %w", pause, id, err)
	}
	return nil
}

// dockerAnswers reports why no Docker engine is usable, or nil when one
// answers, within dockerProbeTimeout. An explicit DOCKER_HOST is dialled
// first: it fails fast on a missing socket or a closed port without
// testcontainers' discovery. Then testcontainers' own provider check runs,
// so Docker starts containers only where testcontainers can reach them; it
// runs in a goroutine because provider discovery does not take a context,
// and a goroutine stuck on an unanswering host is left to finish on its own.
func dockerAnswers(ctx context.Context, dockerHost string) error {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	if dockerHost != "" {
		if err := dialDockerHost(ctx, dockerHost); err != nil {
			return err
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- func() (err error) {
			// Discovery panics in some corners (MustExtractDockerHost);
			// no engine is the honest answer then too.
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("docker discovery: %v", r)
				}
			}()
			p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(silentLogger{}))
			if err != nil {
				return fmt.Errorf("docker provider: %w", err)
			}
			// Health closes the provider.
			if err := p.Health(ctx); err != nil {
				return fmt.Errorf("docker health: %w", err)
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("docker engine did not answer within %s: %w", dockerProbeTimeout, ctx.Err())
	}
}

// dialDockerHost checks that something listens at a DOCKER_HOST address:
// unix:// sockets and tcp:// addresses are dialled; other schemes (ssh://,
// npipe://) are left to testcontainers.
func dialDockerHost(ctx context.Context, dockerHost string) error {
	u, err := url.Parse(dockerHost)
	if err != nil {
		return fmt.Errorf("DOCKER_HOST %q: %w", dockerHost, err)
	}
	var network, addr string
	switch u.Scheme {
	case "unix":
		network, addr = "unix", u.Path
	case "tcp", "http", "https":
		network, addr = "tcp", u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "2375")
			if u.Scheme == "https" {
				addr = net.JoinHostPort(u.Hostname(), "2376")
			}
		}
	default:
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("DOCKER_HOST %s: %w", dockerHost, err)
	}
	return conn.Close()
}

// dockerKafkaPasswords are the SCRAM passwords of the container's users,
// new for each process (the container is thrown away with it).
var dockerKafkaPasswords = func() map[string]string {
	pw := map[string]string{kafkaAdmin: kafkaacl.NewPassword()}
	for _, u := range kafkaacl.Users() {
		pw[u] = kafkaacl.NewPassword()
	}
	return pw
}()

// dockerKafka starts the Kafka container and returns it with the
// administrator's connection from the host.
func dockerKafka(ctx context.Context, tcLog testcontainers.LoggerOption) (testcontainers.Container, broker.Conn, error) {
	ctr, err := testcontainers.Run(ctx, DockerKafkaImage,
		tcLog,
		testcontainers.WithExposedPorts(dockerKafkaPort),
		testcontainers.WithEnv(dockerKafkaEnv),
		// Wait for the start script, then run the image's own entrypoint
		// from it.
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+dockerKafkaStarterReady+" ]; do sleep 0.1; done; exec bash "+dockerKafkaStarter),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			// One hook both writes the script and waits for the broker: a
			// WaitingFor strategy could run before the script exists.
			PostStarts: []testcontainers.ContainerHook{startKafka},
		}),
	)
	if err != nil {
		// testcontainers may return a created container with the error.
		if ctr != nil {
			return ctr, broker.Conn{}, fmt.Errorf("run kafka: %w", err)
		}
		return nil, broker.Conn{}, fmt.Errorf("run kafka: %w", err)
	}
	addr, err := ctr.PortEndpoint(ctx, dockerKafkaPort, "")
	if err != nil {
		return ctr, broker.Conn{}, fmt.Errorf("kafka endpoint: %w", err)
	}
	admin := broker.Conn{Brokers: []string{addr}, Username: kafkaAdmin, Password: dockerKafkaPasswords[kafkaAdmin]}
	// The log says the broker runs; a metadata request from the host says
	// the advertised address and the administrator's credential work from
	// here too.
	if err := pingUntil(ctx, admin, 30*time.Second); err != nil {
		return ctr, admin, fmt.Errorf("kafka at %s: %w", addr, err)
	}
	if err := grant(admin, dockerKafkaPasswords); err != nil {
		return ctr, admin, err
	}
	return ctr, admin, nil
}

// startKafka writes the start script, which advertises the host-mapped
// port to clients and the loopback listener to the broker itself, waits
// until the broker serves, and creates the administrator's credential.
func startKafka(ctx context.Context, c testcontainers.Container) error {
	if err := wait.ForMappedPort(dockerKafkaPort).WaitUntilReady(ctx, c); err != nil {
		return fmt.Errorf("wait for kafka's mapped port: %w", err)
	}
	endpoint, err := c.PortEndpoint(ctx, dockerKafkaPort, "CLIENT")
	if err != nil {
		return fmt.Errorf("kafka endpoint: %w", err)
	}
	script := fmt.Sprintf("#!/bin/bash\nexport KAFKA_ADVERTISED_LISTENERS=%s,BROKER://127.0.0.1:9093\nexec /etc/kafka/docker/run\n", endpoint)
	if err := c.CopyToContainer(ctx, []byte(script), dockerKafkaStarter, 0o755); err != nil {
		return fmt.Errorf("copy kafka start script: %w", err)
	}
	if err := c.CopyToContainer(ctx, nil, dockerKafkaStarterReady, 0o644); err != nil {
		return fmt.Errorf("copy kafka start flag: %w", err)
	}
	if err := wait.ForLog(dockerKafkaReady).AsRegexp().WithStartupTimeout(3*time.Minute).WaitUntilReady(ctx, c); err != nil {
		return err
	}
	// The administrator's SCRAM credential, set over the in-container
	// listener; the services' users and ACLs follow from the host (grant).
	code, out, err := c.Exec(ctx, []string{"/opt/kafka/bin/kafka-configs.sh", "--bootstrap-server", "127.0.0.1:9093",
		"--alter", "--entity-type", "users", "--entity-name", kafkaAdmin,
		"--add-config", "SCRAM-SHA-512=[password=" + dockerKafkaPasswords[kafkaAdmin] + "]"})
	if err == nil && code != 0 {
		b, _ := io.ReadAll(out)
		err = fmt.Errorf("exit status %d: %s", code, b)
	}
	if err != nil {
		return fmt.Errorf("kafka: create the administrator's SCRAM credential: %w", err)
	}
	return nil
}

// pingUntil asks the brokers for metadata until they answer or max passes.
func pingUntil(ctx context.Context, conn broker.Conn, max time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		err := broker.Ping(attempt, conn)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// dockerPostgres starts the PostgreSQL container, with every database of
// Databases created by an init script, and returns it with its host:port.
func dockerPostgres(ctx context.Context, tcLog testcontainers.LoggerOption) (*postgres.PostgresContainer, string, error) {
	var script strings.Builder
	for _, name := range Databases {
		// Names come from Databases, not from input; quoting keeps them
		// valid identifiers all the same.
		fmt.Fprintf(&script, "CREATE DATABASE %q;\n", DatabaseName(name))
	}
	pg, err := postgres.Run(ctx, DockerPostgresImage,
		tcLog,
		postgres.WithUsername(dockerPGUser),
		postgres.WithPassword(dockerPGPassword),
		postgres.WithDatabase("postgres"),
		// The image runs /docker-entrypoint-initdb.d/ before its final
		// start, so the databases exist once the wait strategy passes.
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader:            strings.NewReader(script.String()),
			ContainerFilePath: "/docker-entrypoint-initdb.d/choreo.sql",
			FileMode:          0o644,
		}),
		postgres.BasicWaitStrategies(),
	)
	if err != nil {
		return pg, "", fmt.Errorf("run postgres: %w", err)
	}
	addr, err := pg.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return pg, "", fmt.Errorf("postgres endpoint: %w", err)
	}
	return pg, addr, nil
}

// slogPrintf passes testcontainers' log lines to slog at debug level: they
// are progress chatter (image pulls, container ids), useful only when
// something goes wrong.
type slogPrintf struct{ log *slog.Logger }

// Printf implements testcontainers' log.Logger.
func (l slogPrintf) Printf(format string, v ...any) {
	l.log.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "testcontainers")
}

// silentLogger drops testcontainers' log lines; the probe's failure is
// reported through its error.
type silentLogger struct{}

// Printf implements testcontainers' log.Logger.
func (silentLogger) Printf(string, ...any) {}
