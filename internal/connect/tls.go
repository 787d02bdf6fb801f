package connect

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// tlsParams are the database URL's parameters the connector takes, as
// libpq names them, and Debezium's names for them. pgJDBC, which Debezium
// connects with, reads the files on the worker's machine, and wants a key
// in PKCS-8 DER or PKCS-12 rather than libpq's PEM.
var tlsParams = map[string]string{
	"sslmode":     "database.sslmode",
	"sslrootcert": "database.sslrootcert",
	"sslcert":     "database.sslcert",
	"sslkey":      "database.sslkey",
}

// sslModes are the modes libpq and Debezium both know.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// tlsConfig is the connector's TLS settings from a database URL's query. A
// parameter it cannot pass on is an error: dropped, a sslmode=verify-full
// would silently become Debezium's default, which checks no certificate.
func tlsConfig(query url.Values) (map[string]string, error) {
	out := map[string]string{}
	for name, values := range query {
		key, ok := tlsParams[name]
		if !ok {
			known := make([]string, 0, len(tlsParams))
			for k := range tlsParams {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("connect: database URL parameter %q: the Debezium connector has no setting for it (it takes %s)", name, strings.Join(known, ", "))
		}
		if len(values) != 1 {
			return nil, fmt.Errorf("connect: database URL parameter %q is given %d times", name, len(values))
		}
		if name == "sslmode" && !slices.Contains(sslModes, values[0]) {
			return nil, fmt.Errorf("connect: database URL: sslmode %q: want one of %s", values[0], strings.Join(sslModes, ", "))
		}
		out[key] = values[0]
	}
	return out, nil
}
