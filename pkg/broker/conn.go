package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// SASL mechanisms Conn speaks. The brokers of every run mode offer
// SCRAM-SHA-512 (scripts/infra.sh, deploy/compose, deploy/local).
const (
	SCRAMSHA512 = "SCRAM-SHA-512"
	SCRAMSHA256 = "SCRAM-SHA-256"
)

// Conn is how a process reaches Kafka and who it is there: the bootstrap
// brokers, its SASL/SCRAM user and, optionally, TLS. Every sarama client
// Choreo builds takes its configuration from Conn.Config, so no client can
// connect without the credentials.
//
// A service's Config embeds it under the prefix KAFKA, so its variables are
// KAFKA_BROKERS, KAFKA_USERNAME and so on (envconfig.Process("KAFKA", &c)
// reads them alone).
type Conn struct {
	Brokers Addrs `envconfig:"BROKERS" required:"true"`
	// Mechanism is the SASL mechanism; default SCRAM-SHA-512.
	Mechanism string `envconfig:"SASL_MECHANISM"`
	// Username and Password (or the file PasswordFile, read each time a
	// client is configured, so a rotated password is picked up) are the
	// process's SCRAM credentials.
	Username     string `envconfig:"USERNAME"`
	Password     string `envconfig:"PASSWORD"`
	PasswordFile string `envconfig:"PASSWORD_FILE"`
	// TLS turns TLS on, verified against the system's roots unless CAFile
	// names a PEM bundle; setting CAFile or CertFile turns it on too.
	// CertFile and KeyFile are an optional client certificate.
	TLS      bool   `envconfig:"TLS"`
	CAFile   string `envconfig:"TLS_CA_FILE"`
	CertFile string `envconfig:"TLS_CERT_FILE"`
	KeyFile  string `envconfig:"TLS_KEY_FILE"`
	// Insecure connects without SASL: anyone who reaches the brokers is
	// then anyone. It is for a broker of one's own on a loopback address
	// and must be asked for (KAFKA_INSECURE=true); Warn says so loudly.
	Insecure bool `envconfig:"INSECURE"`
}

// FromEnv reads a Conn from the variables envconfig.Process("KAFKA", &c)
// reads (KAFKA_BROKERS, KAFKA_USERNAME, …), through getenv: for commands
// that take their environment as a function. It does not validate.
func FromEnv(getenv func(string) string) (Conn, error) {
	c := Conn{
		Mechanism: getenv("KAFKA_SASL_MECHANISM"),
		Username:  getenv("KAFKA_USERNAME"), Password: getenv("KAFKA_PASSWORD"), PasswordFile: getenv("KAFKA_PASSWORD_FILE"),
		CAFile: getenv("KAFKA_TLS_CA_FILE"), CertFile: getenv("KAFKA_TLS_CERT_FILE"), KeyFile: getenv("KAFKA_TLS_KEY_FILE"),
	}
	if err := c.Brokers.Decode(getenv("KAFKA_BROKERS")); err != nil {
		return c, fmt.Errorf("KAFKA_BROKERS: %w", err)
	}
	for name, b := range map[string]*bool{"KAFKA_TLS": &c.TLS, "KAFKA_INSECURE": &c.Insecure} {
		if v := getenv(name); v != "" {
			var err error
			if *b, err = strconv.ParseBool(v); err != nil {
				return c, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return c, nil
}

// Validate reports a Conn that cannot connect, or that would connect
// without credentials though Insecure was not asked for. Its errors name
// the environment variables.
func (c Conn) Validate() error {
	if err := ValidateAddrs(c.Brokers); err != nil {
		return fmt.Errorf("KAFKA_BROKERS: %w", err)
	}
	if c.Insecure {
		if c.Username != "" {
			return errors.New("KAFKA_INSECURE: true, yet KAFKA_USERNAME is set: choose credentials or none")
		}
	} else {
		switch {
		case c.Username == "":
			return errors.New("KAFKA_USERNAME: empty; Kafka needs credentials: set KAFKA_USERNAME and KAFKA_PASSWORD " +
				"(or KAFKA_PASSWORD_FILE), e.g. from `eval \"$(scripts/infra.sh env)\"`, or KAFKA_INSECURE=true " +
				"to connect unauthenticated to a development broker")
		case c.Password == "" && c.PasswordFile == "":
			return fmt.Errorf("KAFKA_PASSWORD: empty for KAFKA_USERNAME=%s; set it or KAFKA_PASSWORD_FILE", c.Username)
		case c.Password != "" && c.PasswordFile != "":
			return errors.New("KAFKA_PASSWORD_FILE: set, and KAFKA_PASSWORD too; set one")
		}
		if _, err := c.mechanism(); err != nil {
			return err
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("KAFKA_TLS_CERT_FILE: set it and KAFKA_TLS_KEY_FILE both, or neither")
	}
	return nil
}

// Warn logs, at WARN, that c connects without credentials, if it does.
// The services and the tools call it at start.
func (c Conn) Warn(log *slog.Logger) {
	if c.Insecure {
		log.Warn("KAFKA INSECURE: connecting to Kafka WITHOUT AUTHENTICATION (KAFKA_INSECURE=true); " +
			"anyone who reaches the brokers can read and forge every event; unset it and set KAFKA_USERNAME and KAFKA_PASSWORD")
	}
}

// As returns c as another user, whose password is password or is in the
// file passwordFile: a service's own connection from a shared one.
func (c Conn) As(username, password, passwordFile string) Conn {
	c.Username, c.Password, c.PasswordFile, c.Insecure = username, password, passwordFile, false
	return c
}

func (c Conn) mechanism() (sarama.SASLMechanism, error) {
	switch c.Mechanism {
	case "", SCRAMSHA512:
		return sarama.SASLTypeSCRAMSHA512, nil
	case SCRAMSHA256:
		return sarama.SASLTypeSCRAMSHA256, nil
	}
	return "", fmt.Errorf("KAFKA_SASL_MECHANISM: %s is not %s or %s", c.Mechanism, SCRAMSHA512, SCRAMSHA256)
}

// Config returns the sarama configuration for clientID: Settings, plus
// c's SASL and TLS. It reads PasswordFile, CAFile and the client
// certificate; their errors are returned.
func (c Conn) Config(clientID string) (*sarama.Config, error) {
	cfg := Settings(clientID)
	if !c.Insecure {
		mech, err := c.mechanism()
		if err != nil {
			return nil, err
		}
		password, err := c.Secret()
		if err != nil {
			return nil, err
		}
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.Mechanism = mech
		cfg.Net.SASL.User = c.Username
		cfg.Net.SASL.Password = password
		hash := scram.SHA512
		if mech == sarama.SASLTypeSCRAMSHA256 {
			hash = scram.SHA256
		}
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: hash} }
	}
	if c.TLS || c.CAFile != "" || c.CertFile != "" {
		t, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = t
	}
	return cfg, nil
}

// Secret returns the password: Password, or the content of PasswordFile
// without surrounding white space.
func (c Conn) Secret() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("broker: KAFKA_PASSWORD_FILE: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c Conn) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("broker: KAFKA_TLS_CA_FILE: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("broker: KAFKA_TLS_CA_FILE %s: no PEM certificate in it", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("broker: KAFKA_TLS_CERT_FILE/KAFKA_TLS_KEY_FILE: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// NewClient returns a sarama client configured by Config(clientID).
func (c Conn) NewClient(clientID string) (sarama.Client, error) {
	cfg, err := c.Config(clientID)
	if err != nil {
		return nil, err
	}
	return sarama.NewClient(c.Brokers, cfg)
}

// NewClusterAdmin returns an admin client configured by Config(clientID).
func (c Conn) NewClusterAdmin(clientID string) (sarama.ClusterAdmin, error) {
	cfg, err := c.Config(clientID)
	if err != nil {
		return nil, err
	}
	return sarama.NewClusterAdmin(c.Brokers, cfg)
}

// NewConsumer returns a partition consumer configured by Config(clientID).
func (c Conn) NewConsumer(clientID string) (sarama.Consumer, error) {
	cfg, err := c.Config(clientID)
	if err != nil {
		return nil, err
	}
	return sarama.NewConsumer(c.Brokers, cfg)
}

// NewSyncProducer returns a producer with Settings' guarantees.
func (c Conn) NewSyncProducer(clientID string) (sarama.SyncProducer, error) {
	cfg, err := c.Config(clientID)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer(c.Brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("broker: producer: %w", err)
	}
	return p, nil
}

// scramClient is sarama's SCRAMClient on xdg-go/scram.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *scramClient) Done() bool { return s.conv.Done() }
