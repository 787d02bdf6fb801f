// Command healthcheck is the container health probe of the service images,
// whose distroless runtime has no shell and no curl.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// timeout bounds one probe; the container runtime has its own timeout, but
// a probe that hangs past it would only leave a stray process behind.
const timeout = 3 * time.Second

// Usage: healthcheck [URL]. It GETs URL and exits 0 on 200 OK, 1 otherwise.
// Without an argument it probes the service in the same container: /readyz
// on the port of HTTP_ADDR, which the service reads too, so the image needs
// no per-service probe command.
func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	target, err := probeURL(args, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return probe(ctx, target)
}

// probeURL picks the URL to probe: the argument if there is one, else /readyz
// on the loopback address at HTTP_ADDR's port.
func probeURL(args []string, getenv func(string) string) (string, error) {
	switch len(args) {
	case 0:
	case 1:
		return args[0], nil
	default:
		return "", errors.New("usage: healthcheck [URL]")
	}
	addr := getenv("HTTP_ADDR")
	if addr == "" {
		return "", errors.New("no URL given and HTTP_ADDR is not set")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("HTTP_ADDR %q: %w", addr, err)
	}
	// A service listening on all interfaces (":8080", "0.0.0.0:8080") is
	// reached from inside its own container on the loopback address.
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// probe GETs target and reports an error unless the answer is 200 OK.
func probe(ctx context.Context, target string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", target, err)
	}
	defer resp.Body.Close()
	// Read a little of the body so a failing probe says why in
	// `docker inspect`'s health log.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", target, resp.Status, body)
	}
	return nil
}
