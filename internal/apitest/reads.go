package apitest

import "net/http"

// GetRequests returns the requests that a GET of a resource by id must
// refuse with 400 before the store is reached, named after name: an id
// web.Get's rule refuses — too long, or with an escaped slash, NUL, space
// or invalid UTF-8. collection is the resource's path without its id
// ("/shipments/").
//
// Every service reading through web.Get answers these the same way, as
// PutRequests and PostRequests are answered the same for writes.
func GetRequests(name, collection string) []Request {
	ids := []struct{ suffix, id string }{
		{"TooLongID", tooLongID},
		{"EscapedSlashInID", "o%2F1"},
		{"NULInID", "o%001"},
		{"SpaceInID", "o%201"},
		{"InvalidUTF8InID", "%ff"},
	}
	reqs := make([]Request, len(ids))
	for i, b := range ids {
		reqs[i] = Request{Name: name + b.suffix, Method: http.MethodGet, Path: collection + b.id, Want: 400}
	}
	return reqs
}
