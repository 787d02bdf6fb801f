package httpapi_test

import (
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/apitest"
	"github.com/choreo-saga/choreo/services/tracker/internal/domain"
	"github.com/choreo-saga/choreo/services/tracker/internal/httpapi"
)

// TestOpenAPI keeps openapi.yaml honest: valid OpenAPI, the routes Routes
// serves and no others, the bodies the handlers write, and the document
// served at GET /openapi.yaml. Only answers given before the store is
// reached are served here (the store is nil); TestSagas serves the rest
// against PostgreSQL, and the bodies are checked here through the types
// the handlers encode.
func TestOpenAPI(t *testing.T) {
	api := apitest.Start(t, httpapi.Routes(30*time.Second, nil), httpapi.PageAssets...)
	spec := api.Spec
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	ended := at.Add(time.Second)
	events := []domain.Event{
		{EventID: "0f8e2a7c-1d3b-4c5e-9f60-7a8b9c0d1e2f", Type: "OrderCreated", Service: "order", Topic: "order.events", Partition: 1, Offset: 41, At: at},
		{EventID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Type: "OrderCompleted", Service: "order", Topic: "order.events", Partition: 1, Offset: 42, At: ended},
	}
	running := domain.Summary{OrderID: "o-1", State: domain.Stuck, StartedAt: at, WaitingFor: "payment refund", EventCount: 1}
	completed := domain.Summary{OrderID: "o-1", State: domain.Completed, StartedAt: at, EndedAt: &ended, EventCount: 2}
	declined := []domain.Event{
		{EventID: "6b5a4c3d-2e1f-4a0b-8c9d-0e1f2a3b4c5d", Type: "PaymentDeclined", Service: "payment", Topic: "payment.events", At: at, Reason: "insufficient_funds"},
		{EventID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Type: "OrderCancelled", Service: "order", Topic: "order.events", At: ended, Reason: "insufficient_funds"},
	}
	cancelled := domain.Summary{OrderID: "o-2", State: domain.Cancelled, StartedAt: at, EndedAt: &ended, Reason: "insufficient_funds", EventCount: 2}
	t.Run("Schemas", func(t *testing.T) {
		apitest.CheckSchema(t, spec, "Saga", domain.Saga{Summary: running, Events: events[:1]})
		apitest.CheckSchema(t, spec, "Saga", domain.Saga{Summary: completed, Events: events})
		apitest.CheckSchema(t, spec, "Saga", domain.Saga{Summary: cancelled, Events: declined})
		apitest.CheckSchema(t, spec, "SagaPage", httpapi.SagaPage{Sagas: []domain.Summary{running, completed, cancelled}, NextCursor: "djE6MTox"})
		apitest.CheckSchema(t, spec, "SagaPage", httpapi.SagaPage{Sagas: []domain.Summary{}})
	})
	for _, step := range domain.Next {
		apitest.CheckSchema(t, spec, "WaitingFor", step)
	}
	for _, s := range domain.States {
		apitest.CheckSchema(t, spec, "State", s)
	}

	api.Check(t, apitest.GetRequests("GetSaga", "/sagas/"))
	api.Check(t, []apitest.Request{
		{Name: "ListUnknownState", Method: "GET", Path: "/sagas?state=lost", Want: 400},
		{Name: "ListZeroLimit", Method: "GET", Path: "/sagas?limit=0", Want: 400},
		{Name: "ListLimitAboveMax", Method: "GET", Path: "/sagas?limit=201", Want: 400},
		{Name: "ListLimitNotANumber", Method: "GET", Path: "/sagas?limit=ten", Want: 400},
		{Name: "ListForgedCursor", Method: "GET", Path: "/sagas?cursor=bm90LWEtY3Vyc29y", Want: 400},
		{Name: "ListUnknownParameter", Method: "GET", Path: "/sagas?offset=50", Want: 400},
		{Name: "ListRepeatedParameter", Method: "GET", Path: "/sagas?state=stuck&state=running", Want: 400},
		{Name: "Page", Method: "GET", Path: "/", Want: 200},
		{Name: "PageScript", Method: "GET", Path: "/app.js", Want: 200},
		{Name: "PageStyle", Method: "GET", Path: "/app.css", Want: 200},
		{Name: "UnknownPath", Method: "GET", Path: "/index.html", Want: 404},
		{Name: "UnlistedMethod", Method: "POST", Path: "/sagas", Want: 405},
	})
}
