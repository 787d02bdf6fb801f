package pg

import "time"

// InUTC moves each of ts that is not nil to UTC, in place. The driver
// reads a timestamptz in the session's time zone; a store moves the times
// it answers to UTC so that what a service answers is the same whatever
// the database is configured with. A nil one is a time the row does not
// have (a nullable column read as NULL).
func InUTC(ts ...*time.Time) {
	for _, t := range ts {
		if t != nil {
			*t = t.UTC()
		}
	}
}
