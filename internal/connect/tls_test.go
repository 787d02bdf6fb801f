package connect_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/internal/connect"
)

// TestForPassesTheURLsTLSOn: the database URL's TLS parameters become
// Debezium's, and one the connector has no setting for is refused by name,
// not dropped: a dropped sslmode=verify-full would connect without
// checking the server's certificate.
func TestForPassesTheURLsTLSOn(t *testing.T) {
	const base = "postgres://svc:pw@db.example.com:6543/payment_db"
	tests := []struct {
		name  string
		query string
		want  map[string]string // the connector's database.ssl* settings
		err   string            // a part of the error; "" for none
	}{
		{"None", "", map[string]string{}, ""},
		{"Disable", "?sslmode=disable", map[string]string{"database.sslmode": "disable"}, ""},
		{"VerifyFull", "?sslmode=verify-full&sslrootcert=/etc/pg/root.crt", map[string]string{
			"database.sslmode": "verify-full", "database.sslrootcert": "/etc/pg/root.crt",
		}, ""},
		{"ClientCertificate", "?sslmode=verify-ca&sslrootcert=/r.crt&sslcert=/c.crt&sslkey=/c.pk8", map[string]string{
			"database.sslmode": "verify-ca", "database.sslrootcert": "/r.crt", "database.sslcert": "/c.crt", "database.sslkey": "/c.pk8",
		}, ""},
		{"UnknownParameter", "?sslmode=require&connect_timeout=5", nil, `"connect_timeout"`},
		{"UnknownMode", "?sslmode=verify-everything", nil, `sslmode "verify-everything"`},
		{"TwoModes", "?sslmode=require&sslmode=disable", nil, "given 2 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := connect.For("payment", base+tt.query, "public", "choreo_payment", t.TempDir())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one naming %s", err, tt.err)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k, v := range c.Config {
				if strings.HasPrefix(k, "database.ssl") {
					got[k] = v
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("TLS settings %v, want %v", got, tt.want)
			}
			if c.Config["database.hostname"] != "db.example.com" || c.Config["database.port"] != "6543" || c.Config["database.dbname"] != "payment_db" {
				t.Errorf("host %s port %s database %s", c.Config["database.hostname"], c.Config["database.port"], c.Config["database.dbname"])
			}
		})
	}
}
