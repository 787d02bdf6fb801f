package participant

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// connectURL is ConnectURL carrying the worker's REST credential as its
// user info, which net/http sends as basic authentication (and strips from
// its errors), so the outbox's watcher needs no credential of its own.
func (c Config) connectURL() (string, error) {
	if c.ConnectURL == "" || c.ConnectUsername == "" {
		return c.ConnectURL, nil
	}
	if c.ConnectPasswordFile == "" {
		return "", fmt.Errorf("KAFKA_CONNECT_PASSWORD_FILE: empty, and KAFKA_CONNECT_USERNAME=%s needs a password", c.ConnectUsername)
	}
	b, err := os.ReadFile(c.ConnectPasswordFile)
	if err != nil {
		return "", fmt.Errorf("KAFKA_CONNECT_PASSWORD_FILE: %w", err)
	}
	u, err := url.Parse(c.ConnectURL)
	if err != nil {
		return "", fmt.Errorf("KAFKA_CONNECT_URL: %w", err)
	}
	u.User = url.UserPassword(c.ConnectUsername, strings.TrimSpace(string(b)))
	return u.String(), nil
}

// redacted is raw without the password of its user info, if it parses.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}
