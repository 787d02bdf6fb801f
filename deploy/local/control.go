package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// service is one service of the launcher, run under a context of its own so
// that the control endpoint can stop it and start it again. Stopping ends
// its Run — HTTP API, consumer and relay, the message in hand finished and
// its offset committed — as `docker compose stop` ends a container; that is
// the only stop that needs nothing from the services beyond their Run.
type service struct {
	name     string
	base     string // its HTTP base URL, polled on start until ready
	run      func(context.Context) error
	requests chan request

	mu      sync.Mutex
	running bool
}

// request asks the service's loop to start (true) or stop it, and is
// answered once the loop has done so.
type request struct {
	start bool
	done  chan error
}

func newService(name, base string, run func(context.Context) error) *service {
	return &service{name: name, base: base, run: run, requests: make(chan request)}
}

// loop runs the service until ctx ends, stopping and starting it as asked.
// A Run that ends by itself, not asked to, ends the loop with its error, so
// the launcher stops as it did before services could be stopped.
func (s *service) loop(ctx context.Context) error {
	for {
		runCtx, cancel := context.WithCancel(ctx)
		exited := make(chan error, 1)
		go func() { exited <- s.run(runCtx) }()
		s.setRunning(true)
		var stop *request
		for stop == nil {
			select {
			case err := <-exited:
				cancel()
				s.setRunning(false)
				if err := serviceErr(s.name, err); err != nil {
					return err
				}
				if ctx.Err() == nil {
					// Ended cleanly but unasked: the launcher must not go on
					// without it, with nobody left to answer a start.
					return fmt.Errorf("%s: stopped by itself", s.name)
				}
				return nil
			case req := <-s.requests:
				if req.start {
					req.done <- nil // already running
				} else {
					stop = &req
				}
			}
		}
		cancel()
		err := serviceErr(s.name, <-exited)
		s.setRunning(false)
		stop.done <- err
		if err != nil {
			return err
		}

		for started := false; !started; {
			select {
			case <-ctx.Done():
				return nil
			case req := <-s.requests:
				started = req.start
				req.done <- nil
			}
		}
	}
}

// ask sends a request to the loop and waits for its answer; it fails when
// the launcher is shutting down and the loop no longer listens.
func (s *service) ask(ctx context.Context, start bool) error {
	req := request{start: start, done: make(chan error, 1)}
	select {
	case s.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *service) setRunning(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = r
}

func (s *service) state() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return "running"
	}
	return "stopped"
}

// serviceState is the control endpoint's answer.
type serviceState struct {
	Service string `json:"service"`
	State   string `json:"state"`
}

// controlRoutes is the launcher's own API, apart from the services':
//
//	GET  /services               every service and whether it runs
//	POST /services/{name}/stop   stop one; answers once it has stopped
//	POST /services/{name}/start  start it again; answers once it is ready
//
// ctx is the launcher's: a request waits no longer than it lives.
func controlRoutes(ctx context.Context, services []*service, log *slog.Logger) http.Handler {
	byName := map[string]*service{}
	for _, s := range services {
		byName[s.name] = s
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /services", func(w http.ResponseWriter, r *http.Request) {
		var all []serviceState
		for _, s := range services {
			all = append(all, serviceState{s.name, s.state()})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Service < all[j].Service })
		writeJSON(w, http.StatusOK, all)
	})
	mux.HandleFunc("POST /services/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		s, ok := byName[r.PathValue("name")]
		action := r.PathValue("action")
		if !ok || (action != "stop" && action != "start") {
			http.NotFound(w, r)
			return
		}
		start := action == "start"
		err := s.ask(ctx, start)
		if err == nil && start {
			// Ready means its consumer holds its partitions again, so the
			// next command sees the service at work, not still joining.
			err = waitReady(ctx, 12*time.Second, s.base) // within web.Serve's write timeout
		}
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"service": s.name, "error": err.Error()})
			return
		}
		msg := "service stopped by the control endpoint"
		if start {
			msg = "service started by the control endpoint"
		}
		log.Info(msg, "service", s.name)
		writeJSON(w, http.StatusOK, serviceState{s.name, s.state()})
	})
	return sameMachineOnly(mux)
}

// sameMachineOnly refuses what a web page in the user's browser could send:
// a request with an Origin, or a Sec-Fetch-Site other than none (a POST with
// no body is a CORS simple request, sent without asking), or one whose Host
// is not loopback (DNS rebinding). curl sends none of these, so the README's
// commands pass.
func sameMachineOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		ip := net.ParseIP(host)
		loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
		if r.Header.Get("Origin") != "" || (r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "none") || !loopback {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "the control endpoint answers only commands from this machine (curl), not web pages"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client gone away is no error of ours
}
