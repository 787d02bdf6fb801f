package participant

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateConnectURL: KAFKA_CONNECT_URL is unset or an http(s) URL
// with a host; anything else stops the service before it starts, rather
// than reporting its connector unreachable for ever.
func TestValidateConnectURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"", true}, {"http://127.0.0.1:8183", true}, {"https://connect.internal/", true},
		{"127.0.0.1:8183", false}, {"ftp://connect:8183", false}, {"http://", false}, {"http://[::1", false},
	}
	for _, tt := range tests {
		t.Run("KAFKA_CONNECT_URL="+tt.url, func(t *testing.T) {
			c := DefaultConfig(":0")
			c.DatabaseURL = "postgres://u@db:5432/svc"
			c.Kafka.Brokers = []string{"k1:9092"}
			c.Kafka.Username, c.Kafka.Password = "svc", "secret"
			c.Auth.Disabled = true // without a token key Validate fails whatever the URL
			c.ConnectURL = tt.url
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestConnectURLCarriesTheCredential: the connector's state is read with
// the worker's REST credential, which the worker asks for; a user without
// a password file stops the service before it starts.
func TestConnectURLCarriesTheCredential(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "choreo" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "choreo.password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{ConnectURL: srv.URL, ConnectUsername: "choreo", ConnectPasswordFile: file}
	u, err := c.connectURL()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u + "/connectors")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the worker answered %s, want 200: the credential was not sent", resp.Status)
	}
	c.ConnectPasswordFile = ""
	if _, err := c.connectURL(); err == nil || !strings.Contains(err.Error(), "KAFKA_CONNECT_PASSWORD_FILE") {
		t.Errorf("connectURL without a password file = %v, want an error naming KAFKA_CONNECT_PASSWORD_FILE", err)
	}
}
