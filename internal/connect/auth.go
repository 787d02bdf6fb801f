package connect

import (
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Client is an HTTP client for a worker's REST API that logs in as
// username with the password in passwordFile (HTTP basic authentication:
// scripts/infra.sh's worker runs Kafka's BasicAuthSecurityRestExtension).
// Without a username it sends no credential, for a worker without one.
func Client(username, passwordFile string) (*http.Client, error) {
	if username == "" {
		return &http.Client{}, nil
	}
	if passwordFile == "" {
		return nil, fmt.Errorf("connect: no password file for the worker's REST user %s (KAFKA_CONNECT_PASSWORD_FILE)", username)
	}
	b, err := os.ReadFile(passwordFile)
	if err != nil {
		return nil, fmt.Errorf("connect: the worker's REST password: %w", err)
	}
	password := strings.TrimSpace(string(b))
	return &http.Client{Transport: basicAuth{username: username, password: password, next: http.DefaultTransport}}, nil
}

// basicAuth sets the credential on every request, so each call of this
// package carries it without knowing of it.
type basicAuth struct {
	username, password string
	next               http.RoundTripper
}

func (a basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.SetBasicAuth(a.username, a.password)
	return a.next.RoundTrip(req)
}
