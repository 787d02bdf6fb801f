package broker_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/kelseyhightower/envconfig"

	"github.com/choreo-saga/choreo/pkg/broker"
)

// TestConnValidateRefusesNoCredentials: without credentials a Conn is
// valid only when the insecure opt-out is asked for; every error names its
// variable.
func TestConnValidateRefusesNoCredentials(t *testing.T) {
	addrs := []string{"127.0.0.1:9092"}
	tests := []struct {
		name    string
		conn    broker.Conn
		wantVar string // "" means valid
	}{
		{"UserAndPassword", broker.Conn{Brokers: addrs, Username: "order", Password: "pw"}, ""},
		{"UserAndPasswordFile", broker.Conn{Brokers: addrs, Username: "order", PasswordFile: "/run/secrets/kafka"}, ""},
		{"NoCredentialsIsRefused", broker.Conn{Brokers: addrs}, "KAFKA_USERNAME"},
		{"UserWithoutPasswordIsRefused", broker.Conn{Brokers: addrs, Username: "order"}, "KAFKA_PASSWORD"},
		{"PasswordAndFileIsRefused", broker.Conn{Brokers: addrs, Username: "order", Password: "pw", PasswordFile: "/f"}, "KAFKA_PASSWORD_FILE"},
		{"InsecureOptOut", broker.Conn{Brokers: addrs, Insecure: true}, ""},
		{"InsecureWithAUserIsRefused", broker.Conn{Brokers: addrs, Insecure: true, Username: "order"}, "KAFKA_INSECURE"},
		{"UnknownMechanismIsRefused", broker.Conn{Brokers: addrs, Username: "order", Password: "pw", Mechanism: "PLAIN"}, "KAFKA_SASL_MECHANISM"},
		{"CertWithoutKeyIsRefused", broker.Conn{Brokers: addrs, Username: "order", Password: "pw", CertFile: "/c.pem"}, "KAFKA_TLS_CERT_FILE"},
		{"NoBrokersIsRefused", broker.Conn{Username: "order", Password: "pw"}, "KAFKA_BROKERS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.conn.Validate()
			switch {
			case tt.wantVar == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantVar != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantVar+":")):
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantVar)
			}
		})
	}
}

// TestConnConfigAuthenticates: Config logs in with the credentials given
// (the password file read, trimmed), turns TLS on when asked, and leaves
// SASL off only for the opt-out.
func TestConnConfigAuthenticates(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := []string{"127.0.0.1:9092"}
	tests := []struct {
		name     string
		conn     broker.Conn
		sasl     bool
		password string
		mech     sarama.SASLMechanism
		tls      bool
	}{
		{"Password", broker.Conn{Brokers: addrs, Username: "order", Password: "pw"}, true, "pw", sarama.SASLTypeSCRAMSHA512, false},
		{"PasswordFile", broker.Conn{Brokers: addrs, Username: "order", PasswordFile: pwFile}, true, "from-file", sarama.SASLTypeSCRAMSHA512, false},
		{"SHA256", broker.Conn{Brokers: addrs, Username: "order", Password: "pw", Mechanism: broker.SCRAMSHA256}, true, "pw", sarama.SASLTypeSCRAMSHA256, false},
		{"TLS", broker.Conn{Brokers: addrs, Username: "order", Password: "pw", TLS: true}, true, "pw", sarama.SASLTypeSCRAMSHA512, true},
		{"Insecure", broker.Conn{Brokers: addrs, Insecure: true}, false, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.conn.Config("test")
			if err != nil {
				t.Fatal(err)
			}
			if c.Net.SASL.Enable != tt.sasl || c.Net.SASL.Password != tt.password || (tt.sasl && c.Net.SASL.Mechanism != tt.mech) {
				t.Errorf("SASL enable=%v mechanism=%s password=%q, want %v %s %q", c.Net.SASL.Enable, c.Net.SASL.Mechanism, c.Net.SASL.Password, tt.sasl, tt.mech, tt.password)
			}
			if c.Net.TLS.Enable != tt.tls {
				t.Errorf("TLS = %v, want %v", c.Net.TLS.Enable, tt.tls)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("sarama refuses the config: %v", err)
			}
		})
	}
	t.Run("MissingPasswordFileFails", func(t *testing.T) {
		_, err := broker.Conn{Brokers: addrs, Username: "order", PasswordFile: filepath.Join(dir, "none")}.Config("test")
		if err == nil || !strings.Contains(err.Error(), "KAFKA_PASSWORD_FILE") {
			t.Fatalf("Config = %v, want an error naming KAFKA_PASSWORD_FILE", err)
		}
	})
	t.Run("CAFileWithoutCertificateFails", func(t *testing.T) {
		bad := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := broker.Conn{Brokers: addrs, Username: "order", Password: "pw", CAFile: bad}.Config("test")
		if err == nil || !strings.Contains(err.Error(), "KAFKA_TLS_CA_FILE") {
			t.Fatalf("Config = %v, want an error naming KAFKA_TLS_CA_FILE", err)
		}
	})
}

// TestFromEnvReadsWhatEnvconfigReads: the commands that take a getenv
// function and the services (envconfig) read the same variables.
func TestFromEnvReadsWhatEnvconfigReads(t *testing.T) {
	env := map[string]string{
		"KAFKA_BROKERS": "a:9092, b:9092", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
		"KAFKA_USERNAME": "order", "KAFKA_PASSWORD": "pw", "KAFKA_PASSWORD_FILE": "/f",
		"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": "/ca", "KAFKA_TLS_CERT_FILE": "/c", "KAFKA_TLS_KEY_FILE": "/k",
		"KAFKA_INSECURE": "true",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	var want broker.Conn
	if err := envconfig.Process("KAFKA", &want); err != nil {
		t.Fatal(err)
	}
	got, err := broker.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Brokers, ",") != "a:9092,b:9092" || got.Username != want.Username || got.Password != want.Password ||
		got.PasswordFile != want.PasswordFile || got.Mechanism != want.Mechanism || got.TLS != want.TLS ||
		got.CAFile != want.CAFile || got.CertFile != want.CertFile || got.KeyFile != want.KeyFile || got.Insecure != want.Insecure ||
		strings.Join(got.Brokers, ",") != strings.Join(want.Brokers, ",") {
		t.Errorf("FromEnv = %+v, envconfig = %+v", got, want)
	}
}

// TestWarnSaysInsecureLoudly: the opt-out is logged at WARN; a Conn with
// credentials logs nothing.
func TestWarnSaysInsecureLoudly(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	broker.Conn{Username: "order", Password: "pw"}.Warn(log)
	if buf.Len() != 0 {
		t.Fatalf("Warn with credentials logged %q", buf.String())
	}
	broker.Conn{Insecure: true}.Warn(log)
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("Warn of the opt-out logged %q", buf.String())
	}
}
