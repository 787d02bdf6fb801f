package testenv

import (
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/participant/participanttest"
)

// Conformance runs the runtime's guarantees (participanttest.Run) against
// the service whose participant.Spec spec builds from cfg, each check on a
// fresh DB with the spec's own schema, and reads every case's outcome with
// state: a service's reactions all change the same rows. It is each
// service's TestConformance but for the cases, which are the service's own.
func Conformance[C any](t *testing.T, spec func(C) (participant.Spec, error), cfg C,
	state func(t *testing.T, db *sqlx.DB, e events.Envelope) any, cases []participanttest.Case) {
	t.Helper()
	s, err := spec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cases = slices.Clone(cases)
	for i := range cases {
		cases[i].State = state
	}
	participanttest.Run(t, participanttest.Suite{
		Spec:  s,
		DB:    func(t *testing.T) *sqlx.DB { return DB(t, s.Schema) },
		Cases: cases,
	})
}
