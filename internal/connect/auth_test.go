package connect_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/connect"
	"github.com/choreo-saga/choreo/internal/testenv"
)

// TestRESTWithoutTheCredentialIsRefused: the worker's REST API answers 401
// to a request without the credential or with a wrong one, reads included
// (a connector's configuration names its files and users) and a new
// connector above all (it would run with the worker's rights); with the
// credential it answers.
func TestRESTWithoutTheCredentialIsRefused(t *testing.T) {
	w := testenv.Connect(t)
	wrongFile := filepath.Join(t.TempDir(), "wrong.password")
	if err := os.WriteFile(wrongFile, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong, err := connect.Client(os.Getenv("KAFKA_CONNECT_USERNAME"), wrongFile)
	if err != nil {
		t.Fatal(err)
	}
	const create = `{"name":"test-intruder","config":{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector"}}`
	tests := []struct {
		name   string
		client *http.Client
		method string
		path   string
		want   int
	}{
		{"NoCredentialListing", http.DefaultClient, http.MethodGet, "/connectors", http.StatusUnauthorized},
		{"NoCredentialRoot", http.DefaultClient, http.MethodGet, "/", http.StatusUnauthorized},
		{"NoCredentialCreating", http.DefaultClient, http.MethodPost, "/connectors", http.StatusUnauthorized},
		{"WrongPasswordListing", wrong, http.MethodGet, "/connectors", http.StatusUnauthorized},
		{"WrongPasswordCreating", wrong, http.MethodPost, "/connectors", http.StatusUnauthorized},
		{"CredentialListing", w.Client, http.MethodGet, "/connectors", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, w.URL+tt.path, strings.NewReader(create))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := tt.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %s, want %d", tt.method, tt.path, resp.Status, tt.want)
			}
		})
	}
	if strings.Contains(get(t, w, "/connectors"), "test-intruder") {
		t.Error("a connector was created without the credential")
	}
}
