// Package shipping is the shipping service: it schedules an order's
// shipment once its items are reserved, or fails it when the destination is
// not served, which starts the compensations.
package shipping

import (
	"context"
	"fmt"
	"strings"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/pg"
	"github.com/choreo-saga/choreo/services/shipping/internal/eventapi"
	"github.com/choreo-saga/choreo/services/shipping/internal/httpapi"
	"github.com/choreo-saga/choreo/services/shipping/internal/store"
)

// Name is the service's name: its consumer group, de-duplication scope
// and the source of the events it emits.
const Name = "shipping"

// Config is the service's configuration: the runtime's, and the countries
// it serves. cmd/shipping reads it from the environment over DefaultConfig.
type Config struct {
	participant.Config
	// ServedCountries is a comma-separated list of ISO 3166-1 alpha-2
	// codes; see ParseCountries. It stays a plain string so that Validate,
	// not envconfig, reports a bad entry, naming the variable.
	ServedCountries string `envconfig:"SHIPPING_SERVED_COUNTRIES"`
}

// DefaultConfig returns the service's defaults: HTTP on :8083, shipping to
// JP, US, GB, DE and FR.
func DefaultConfig() Config {
	return Config{Config: participant.DefaultConfig(":8083"), ServedCountries: "JP,US,GB,DE,FR"}
}

// Validate reports the first bad setting, naming its variable.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	_, err := c.Served()
	return err
}

// Served returns the set of countries the service delivers to, parsed from
// ServedCountries. Errors name SHIPPING_SERVED_COUNTRIES.
func (c Config) Served() (map[string]bool, error) {
	served, err := ParseCountries(c.ServedCountries)
	if err != nil {
		return nil, fmt.Errorf("SHIPPING_SERVED_COUNTRIES: %w", err)
	}
	return served, nil
}

// ParseCountries parses a comma-separated list of country codes such as
// " jp, us " into the set {JP, US}. Each entry, trimmed, must be two ASCII
// letters, and is kept upper-cased; an empty entry is an error too, because
// a stray comma more likely hides a typo than means nothing.
func ParseCountries(list string) (map[string]bool, error) {
	served := map[string]bool{}
	for i, raw := range strings.Split(list, ",") {
		// Checked before upper-casing, so a non-ASCII letter that
		// upper-cases to ASCII (dotless ı → I) cannot slip through.
		code := strings.TrimSpace(raw)
		if len(code) != 2 || !isLetter(code[0]) || !isLetter(code[1]) {
			return nil, fmt.Errorf("entry %d %q is not a two-letter country code", i+1, raw)
		}
		served[strings.ToUpper(code)] = true
	}
	return served, nil
}

func isLetter(b byte) bool { return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' }

// Run runs the service until ctx ends: its HTTP API, its consumer group and
// its outbox relay (see package participant). It returns after all three
// stopped, the message in hand finished and its offset committed.
func Run(ctx context.Context, cfg Config) error { return participant.Run(ctx, cfg, Spec) }

// Spec is what makes this service itself: its tables, reactions and API.
func Spec(cfg Config) (participant.Spec, error) {
	served, err := cfg.Served()
	if err != nil {
		return participant.Spec{}, err
	}
	return participant.Spec{
		Name:      Name,
		Produces:  events.TopicShipping,
		Schema:    Schema,
		Reactions: eventapi.Reactions(served),
		API:       httpapi.Routes,
	}, nil
}

// Schema is the service's own tables.
var Schema = pg.Schema{Name: Name, FS: store.Migrations, Dir: "migrations"}
