package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// StatusError is an answer whose status is not 2xx.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// Do sends body, unless nil, as JSON to url with the headers in hdr and
// token as its bearer token (see Tokens), and decodes a 2xx answer into
// v, unless nil: the one call a load driver makes of the services' APIs.
// It returns the answer's headers; an answer other than 2xx is a
// *StatusError carrying its body (up to 1 MiB).
func Do(ctx context.Context, hc *http.Client, token, method, url string, hdr map[string]string, body, v any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, val := range hdr {
		req.Header.Set(k, val)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.Header, fmt.Errorf("read %s %s: %w", method, url, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp.Header, &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(b))}
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return resp.Header, fmt.Errorf("decode %s %s: %w", method, url, err)
		}
	}
	return resp.Header, nil
}
