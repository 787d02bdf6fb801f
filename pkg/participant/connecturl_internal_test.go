package participant

import "testing"

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
