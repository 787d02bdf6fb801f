package connect

import (
	"context"
	"net/http"
)

// Pause and Resume hold a connector's task still and let it go on, its
// slot keeping what is committed meanwhile: bench/outbox pauses Debezium
// while it commits a backlog, to time the drain alone, as it starts any
// other relay after its backlog.

// Pause pauses connector name on the worker at base.
func Pause(ctx context.Context, client *http.Client, base, name string) error {
	return call(ctx, client, http.MethodPut, base, name, "/pause")
}

// Resume resumes connector name on the worker at base.
func Resume(ctx context.Context, client *http.Client, base, name string) error {
	return call(ctx, client, http.MethodPut, base, name, "/resume")
}
