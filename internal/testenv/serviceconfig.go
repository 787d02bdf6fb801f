package testenv

import (
	"testing"

	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/broker"
	"github.com/choreo-saga/choreo/pkg/participant"
)

// CheckServiceConfig checks a service's Config.Validate with CheckValidate:
// defaults, given the database and brokers they have none for, are valid;
// each of the runtime's settings made bad fails naming its variable, which
// shows the service's Validate checks the embedded participant.Config; and
// then each of the service's own cases. runtime returns that embedded
// Config, so the runtime's cases are written once for every service.
func CheckServiceConfig[C interface{ Validate() error }](t *testing.T, defaults C, runtime func(*C) *participant.Config, own []ConfigCase[C]) {
	t.Helper()
	valid := func() C {
		c := defaults
		r := runtime(&c)
		r.DatabaseURL = "postgres://postgres@127.0.0.1:5432/service_db?sslmode=disable"
		r.Kafka = broker.Conn{Brokers: []string{"127.0.0.1:9092"}, Username: "svc", Password: "pw"}
		r.Auth = bearer.Config{PublicKeyFile: "/run/keys/token.pem", Issuer: "https://idp.example", Audience: "choreo"}
		return c
	}
	set := func(change func(*participant.Config)) func(*C) { return func(c *C) { change(runtime(c)) } }
	cases := []ConfigCase[C]{
		{Name: "DefaultsAreValid", Change: func(*C) {}},
		{Name: "DatabaseURLWithWrongSchemeFails", Change: set(func(c *participant.Config) { c.DatabaseURL = "mysql://h/db" }), WantVar: "DATABASE_URL"},
		{Name: "DatabaseURLWithoutDatabaseFails", Change: set(func(c *participant.Config) { c.DatabaseURL = "postgres://127.0.0.1:5432" }), WantVar: "DATABASE_URL"},
		{Name: "EmptyDatabaseURLFails", Change: set(func(c *participant.Config) { c.DatabaseURL = "" }), WantVar: "DATABASE_URL"},
		{Name: "NoKafkaBrokersFails", Change: set(func(c *participant.Config) { c.Kafka.Brokers = nil }), WantVar: "KAFKA_BROKERS"},
		{Name: "KafkaBrokerWithoutPortFails", Change: set(func(c *participant.Config) { c.Kafka.Brokers = []string{"localhost"} }), WantVar: "KAFKA_BROKERS"},
		{Name: "NoKafkaCredentialsFails", Change: set(func(c *participant.Config) { c.Kafka.Username, c.Kafka.Password = "", "" }), WantVar: "KAFKA_USERNAME"},
		{Name: "KafkaUserWithoutPasswordFails", Change: set(func(c *participant.Config) { c.Kafka.Password = "" }), WantVar: "KAFKA_PASSWORD"},
		{Name: "KafkaInsecureOptOutIsValid", Change: set(func(c *participant.Config) { c.Kafka.Username, c.Kafka.Password, c.Kafka.Insecure = "", "", true })},
		{Name: "KafkaInsecureWithCredentialsFails", Change: set(func(c *participant.Config) { c.Kafka.Insecure = true }), WantVar: "KAFKA_INSECURE"},
		{Name: "EmptyHTTPAddrFails", Change: set(func(c *participant.Config) { c.HTTPAddr = "" }), WantVar: "HTTP_ADDR"},
		{Name: "NoTokenKeyFails", Change: set(func(c *participant.Config) { c.Auth = bearer.Config{} }), WantVar: "AUTH_PUBLIC_KEY_FILE"},
		{Name: "AuthDisabledIsValid", Change: set(func(c *participant.Config) { c.Auth = bearer.Config{Disabled: true} }), WantVar: ""},
		{Name: "AuthDisabledWithAKeyFails", Change: set(func(c *participant.Config) { c.Auth.Disabled = true }), WantVar: "AUTH_DISABLED"},
		{Name: "TwoTokenKeysFail", Change: set(func(c *participant.Config) { c.Auth.JWKSURL = "https://idp.example/jwks" }), WantVar: "AUTH_JWKS_URL"},
		{Name: "NoIssuerFails", Change: set(func(c *participant.Config) { c.Auth.Issuer = "" }), WantVar: "AUTH_ISSUER"},
		{Name: "NoAudienceFails", Change: set(func(c *participant.Config) { c.Auth.Audience = "" }), WantVar: "AUTH_AUDIENCE"},
		{Name: "JWKSURLNotHTTPFails", Change: set(func(c *participant.Config) {
			c.Auth.PublicKeyFile, c.Auth.JWKSURL = "", "file:///etc/jwks.json"
		}), WantVar: "AUTH_JWKS_URL"},
	}
	CheckValidate(t, valid, append(cases, own...))
}
