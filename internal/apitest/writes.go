package apitest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/web"
)

// tooLongID is one byte over the 64 an id in a path may have.
var tooLongID = strings.Repeat("x", 65)

// amountBody is a write's JSON body whose one field is the number n, as
// text so that a test can write what no int64 holds.
func amountBody(field, n string) string { return fmt.Sprintf(`{"%s":%s}`, field, n) }

// PutRequests returns the requests that a PUT of a resource web.Put
// serves must refuse before the store is reached, named after name: an id
// web.Get's rule refuses, a body that is not JSON or is too large, the
// conditions web.Put does not accept (a weak or * If-Match, an If-None-Match
// other than *, both at once), and an amount (field, the body's one number)
// below 0 or above events.MaxAmount. collection is the resource's path
// without its id ("/stock/"), id a valid one.
//
// Every service whose operators write through web.Put answers these the
// same way; a service's own table adds the refusals of its own fields.
func PutRequests(name, collection, id, field string) []Request {
	path, valid := collection+id, amountBody(field, "1")
	put := func(suffix, path, body string, header http.Header, want int) Request {
		return Request{Name: name + suffix, Method: http.MethodPut, Path: path, Body: body, Header: header, Want: want}
	}
	return []Request{
		put("TooLongID", collection+tooLongID, valid, nil, 400),
		put("EscapedSlashInID", collection+"x%2F1", valid, nil, 400),
		put("NULInID", collection+"x%001", valid, nil, 400),
		put("NotJSON", path, valid, http.Header{"Content-Type": {"text/plain"}}, 415),
		put("TooLarge", path, amountBody(field, strings.Repeat(" ", web.MaxBodyBytes)+"1"), nil, 413),
		put("Negative", path, amountBody(field, "-1"), nil, 400),
		put("AboveMaxAmount", path, amountBody(field, fmt.Sprint(events.MaxAmount+1)), nil, 400),
		put("WeakIfMatch", path, valid, http.Header{"If-Match": {`W/"3"`}}, 400),
		put("IfMatchStar", path, valid, http.Header{"If-Match": {"*"}}, 400),
		put("IfNoneMatchTag", path, valid, http.Header{"If-None-Match": {`"3"`}}, 400),
		put("BothConditions", path, valid, http.Header{"If-Match": {`"3"`}, "If-None-Match": {"*"}}, 400),
	}
}

// PostRequests returns the requests that an action web.Add serves, which
// adds a positive amount (field, the body's one number) to a resource,
// must refuse before the store is reached, named after name: the amount
// missing, 0, negative or above events.MaxAmount, a body that is not JSON
// or is too large, an id web.Get's rule refuses, and a GET of the action.
// collection is the resource's path without its id ("/stock/"), id a valid
// one and action what follows it ("/restock").
func PostRequests(name, collection, id, action, field string) []Request {
	path, valid := collection+id+action, amountBody(field, "1")
	post := func(suffix, path, body string, header http.Header, want int) Request {
		return Request{Name: name + suffix, Method: http.MethodPost, Path: path, Body: body, Header: header, Want: want}
	}
	return []Request{
		post("Missing", path, `{}`, nil, 400),
		post("Zero", path, amountBody(field, "0"), nil, 400),
		post("Negative", path, amountBody(field, "-1"), nil, 400),
		post("AboveMaxAmount", path, amountBody(field, fmt.Sprint(events.MaxAmount+1)), nil, 400),
		post("NotJSON", path, valid, http.Header{"Content-Type": {"text/plain"}}, 415),
		post("TooLarge", path, amountBody(field, strings.Repeat(" ", web.MaxBodyBytes)+"1"), nil, 413),
		post("TooLongID", collection+tooLongID+action, valid, nil, 400),
		{Name: name + "UnlistedMethod", Method: http.MethodGet, Path: path, Want: 405},
	}
}

// Write is one step of an operator's writes to one kind of resource: a
// request as a client of web.Put or web.Post sends it, after a saga's
// change, if any, the status it must get, and the resource stored
// afterwards.
type Write[T comparable] struct {
	Name                 string
	Method, Path         string
	IfMatch, IfNoneMatch string
	IdempotencyKey       string // sent as Idempotency-Key if not empty
	Body                 string
	Before               func(t *testing.T) // a saga's change before the request
	Want                 int
	Stored               T // afterwards; the zero value: the resource does not exist
}

// CheckWrites sends steps in order, each as a subtest, to h on a real
// store, each answer checked against openapi.yaml in the test's directory
// (CheckWrite), and after each reads the resource the step's path names
// back through get: it must be what the step stored, served at
// collection+id with the ETag of its version (CheckStored, web.Versioned). collection is
// the resource's path without its id ("/stock/"); an action's path goes
// on after the id ("/stock/{sku}/restock").
func CheckWrites[T interface {
	comparable
	web.Versioned
}](t *testing.T, h http.Handler, collection string, get func(context.Context, string) (T, error), steps []Write[T]) {
	t.Helper()
	spec := ReadSpec(t)
	for _, s := range steps {
		t.Run(s.Name, func(t *testing.T) {
			if s.Before != nil {
				s.Before(t)
			}
			CheckWrite(t, h, spec, s.Method, s.Path, s.IfMatch, s.IfNoneMatch, s.IdempotencyKey, s.Body, s.Want)

			id, _, _ := strings.Cut(strings.TrimPrefix(s.Path, collection), "/")
			CheckStored(t, h, get, id, collection+id, s.Stored, s.Stored.CurrentVersion())
		})
	}
}
