package domain_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/services/order/internal/domain"
)

func TestCursorRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    domain.Cursor
	}{
		{"Microseconds", domain.Cursor{CreatedAt: time.Date(2026, 11, 25, 9, 30, 0, 123456000, time.UTC), ID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13"}},
		{"WholeSecond", domain.Cursor{CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ID: "00000000-0000-0000-0000-000000000000"}},
		{"OtherZoneComesBackUTC", domain.Cursor{CreatedAt: time.Date(2026, 1, 1, 9, 0, 0, 1000, time.FixedZone("JST", 9*3600)), ID: "92113d6b-9b71-5272-9e34-cd4a24e34d37"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.c.Encode()
			if strings.ContainsAny(s, "+/=") {
				t.Fatalf("cursor %q is not URL-safe unpadded base64", s)
			}
			got, err := domain.DecodeCursor(s)
			if err != nil {
				t.Fatalf("DecodeCursor(%q): %v", s, err)
			}
			if !got.CreatedAt.Equal(tt.c.CreatedAt) || got.CreatedAt.Location() != time.UTC || got.ID != tt.c.ID {
				t.Fatalf("round trip = %+v, want %+v", got, tt.c)
			}
			if want := (domain.Cursor{CreatedAt: tt.c.CreatedAt.UTC(), ID: tt.c.ID}).Encode(); got.Encode() != want {
				t.Fatal("a decoded cursor encodes differently")
			}
		})
	}
}

func TestDecodeCursorRejectsGarbage(t *testing.T) {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	const id = "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13"
	tests := map[string]string{
		"Empty":           "",
		"NotBase64":       "!!!",
		"Padded":          domain.Cursor{CreatedAt: time.Now(), ID: id}.Encode() + "=",
		"StdBase64":       base64.StdEncoding.EncodeToString([]byte(`{"created_at":"2026-01-01T00:00:00Z","id":"` + id + `"}>>>`)),
		"NotJSON":         b64("hello"),
		"JSONArray":       b64(`["2026-01-01T00:00:00Z","` + id + `"]`),
		"UnknownField":    b64(`{"created_at":"2026-01-01T00:00:00Z","id":"` + id + `","offset":20}`),
		"TrailingData":    b64(`{"created_at":"2026-01-01T00:00:00Z","id":"` + id + `"}{}`),
		"NoTime":          b64(`{"id":"` + id + `"}`),
		"BadTime":         b64(`{"created_at":"yesterday","id":"` + id + `"}`),
		"NoID":            b64(`{"created_at":"2026-01-01T00:00:00Z"}`),
		"IDNotAUUID":      b64(`{"created_at":"2026-01-01T00:00:00Z","id":"42"}`),
		"IDNotCanonical":  b64(`{"created_at":"2026-01-01T00:00:00Z","id":"` + strings.ToUpper(id) + `"}`),
		"SQLInID":         b64(`{"created_at":"2026-01-01T00:00:00Z","id":"'; DROP TABLE orders; --"}`),
		"OffsetNumber":    "20",
		"NullJSON":        b64(`null`),
		"TruncatedCursor": domain.Cursor{CreatedAt: time.Now(), ID: id}.Encode()[:20],
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			if c, err := domain.DecodeCursor(s); err == nil {
				t.Fatalf("DecodeCursor(%q) = %+v, want an error", s, c)
			}
		})
	}
}

func TestParseListQuery(t *testing.T) {
	cursor := domain.Cursor{CreatedAt: time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC), ID: "3f1c9a52-8d0e-4b7a-9a65-2c4e1f0b7d13"}
	tests := []struct {
		name    string
		params  map[string][]string
		want    domain.ListQuery // checked when wantErr is ""
		wantErr string           // substring naming the parameter
	}{
		{"NoneListsTwentyOfAll", nil, domain.ListQuery{Limit: 20}, ""},
		{"EveryFilter", map[string][]string{"customer_id": {"c-1"}, "status": {"CANCELLED"}, "limit": {"100"}, "cursor": {cursor.Encode()}},
			domain.ListQuery{CustomerID: "c-1", Status: domain.StatusCancelled, Limit: 100, After: &cursor}, ""},
		{"StatusAlone", map[string][]string{"status": {"PENDING"}}, domain.ListQuery{Status: domain.StatusPending, Limit: 20}, ""},
		{"LimitOne", map[string][]string{"limit": {"1"}}, domain.ListQuery{Limit: 1}, ""},
		{"UnknownStatus", map[string][]string{"status": {"SHIPPED"}}, domain.ListQuery{}, "status"},
		{"LowerCaseStatus", map[string][]string{"status": {"pending"}}, domain.ListQuery{}, "status"},
		{"EmptyStatus", map[string][]string{"status": {""}}, domain.ListQuery{}, "status"},
		{"LimitZero", map[string][]string{"limit": {"0"}}, domain.ListQuery{}, "limit"},
		{"LimitAboveMax", map[string][]string{"limit": {"101"}}, domain.ListQuery{}, "limit"},
		{"NegativeLimit", map[string][]string{"limit": {"-1"}}, domain.ListQuery{}, "limit"},
		{"LimitNotANumber", map[string][]string{"limit": {"ten"}}, domain.ListQuery{}, "limit"},
		{"LimitHuge", map[string][]string{"limit": {"99999999999999999999"}}, domain.ListQuery{}, "limit"},
		{"BadCursor", map[string][]string{"cursor": {"garbage"}}, domain.ListQuery{}, "cursor"},
		{"EmptyCursor", map[string][]string{"cursor": {""}}, domain.ListQuery{}, "cursor"},
		{"EmptyCustomer", map[string][]string{"customer_id": {""}}, domain.ListQuery{}, "customer_id"},
		{"CustomerWithSlash", map[string][]string{"customer_id": {"c/1"}}, domain.ListQuery{}, "customer_id"},
		{"CustomerTooLong", map[string][]string{"customer_id": {strings.Repeat("c", 65)}}, domain.ListQuery{}, "customer_id"},
		{"RepeatedParameter", map[string][]string{"status": {"PENDING", "CANCELLED"}}, domain.ListQuery{}, "status"},
		{"UnknownParameter", map[string][]string{"customer": {"c-1"}}, domain.ListQuery{}, `"customer"`},
		{"OffsetRefused", map[string][]string{"offset": {"20"}}, domain.ListQuery{}, "offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.ParseListQuery(tt.params)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseListQuery error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseListQuery: %v", err)
			}
			if got.CustomerID != tt.want.CustomerID || got.Status != tt.want.Status || got.Limit != tt.want.Limit ||
				(got.After == nil) != (tt.want.After == nil) ||
				(got.After != nil && (!got.After.CreatedAt.Equal(tt.want.After.CreatedAt) || got.After.ID != tt.want.After.ID)) {
				t.Fatalf("ParseListQuery = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewPage(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)
	orders := func(n int) []domain.Order {
		os := make([]domain.Order, n)
		for i := range os {
			os[i] = domain.Order{ID: []string{"a", "b", "c", "d"}[i], CreatedAt: at}
		}
		return os
	}
	t.Run("NoneIsAnEmptyLastPage", func(t *testing.T) {
		p := domain.NewPage(nil, 2)
		if p.Orders == nil || len(p.Orders) != 0 || p.NextCursor != "" {
			t.Fatalf("NewPage(nil) = %+v", p)
		}
	})
	t.Run("FewerThanLimitIsTheLastPage", func(t *testing.T) {
		if p := domain.NewPage(orders(1), 2); len(p.Orders) != 1 || p.NextCursor != "" {
			t.Fatalf("NewPage = %+v", p)
		}
	})
	t.Run("ExactlyLimitIsTheLastPage", func(t *testing.T) {
		if p := domain.NewPage(orders(2), 2); len(p.Orders) != 2 || p.NextCursor != "" {
			t.Fatalf("NewPage = %+v", p)
		}
	})
	t.Run("OneMoreThanLimitPointsPastTheLastShown", func(t *testing.T) {
		p := domain.NewPage(orders(3), 2)
		if len(p.Orders) != 2 || p.Orders[1].ID != "b" {
			t.Fatalf("NewPage = %+v", p)
		}
		want := domain.Cursor{CreatedAt: at, ID: "b"}.Encode()
		if p.NextCursor != want {
			t.Fatalf("next_cursor = %q, want the key of order b %q", p.NextCursor, want)
		}
	})
}
