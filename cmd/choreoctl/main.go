// Command choreoctl is the operator's tool for what the services set aside,
// through each service's admin API: the orders a permanent failure parked,
// and the outbox rows Kafka refused; and, for development, the token key
// and tokens an identity provider would issue.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/pkg/bearer"
	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
	"github.com/choreo-saga/choreo/pkg/park"
)

// defaultServices are where make run and deploy/local serve each service.
const defaultServices = "order=http://127.0.0.1:8080,payment=http://127.0.0.1:8081,inventory=http://127.0.0.1:8082,shipping=http://127.0.0.1:8083"

func main() {
	cli.Main("choreoctl", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}

// commands is the usage's list of what choreoctl does. Replay and release
// are idempotent: run again, they report what was already resolved and
// change nothing. Without -service, -order and -event act on every service
// that has them parked. The services' addresses default to the local ones
// (make run, go run ./deploy/local); the admin API needs an operator's
// token: -token, else $CHOREO_TOKEN, else one signed for a minute with the
// development key (internal/devkey), if there is one. dev-key and token
// use that key, made on first use in $CHOREO_DEV_KEY_DIR, else
// ~/.cache/choreo/dev-key.
const commands = `usage: choreoctl [-services URLS] [-token TOKEN] [-json] COMMAND [flags]

commands:
  parked                            every parked order and row, per service
  dead-letters                      only the failures, with their reasons
  replay -order ID [-service S]     apply an order's rows, in order, once the cause is fixed
  replay -event ID [-service S]     … or the one row at the head of its order
  replay -row N -service S          … by row number
  release -order ID [-service S]    let them go unapplied (marked processed)
  outbox-refused                    outbox rows Kafka refused
  outbox-retry -service S -id N     put one back in line for the relay
  dev-key                           make the development key pair once; print the services' AUTH_* settings
  token -sub ID [-operator] [-ttl D]  a development token of customer (or operator) ID
  kafka-acls [-brokers B]           create the services' Kafka ACLs, as the administrator
  connect-register [-connect URL]   register the services' Debezium connectors (OUTBOX_RELAY=debezium)
  connect-remove [-connect URL]     remove them and their slots, to go back to the built-in relay
`

// run is the command; -h prints the usage to errOut and is not an error.
func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	err := runCommand(ctx, args, getenv, out, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("choreoctl", flag.ContinueOnError)
	fs.SetOutput(errOut)
	// Defaults that come from the environment are resolved after
	// parsing, so the usage names the variable, never its value (a token).
	servicesFlag := fs.String("services", "", "the services' base `URLs`, name=url,… (default: $CHOREO_SERVICES, else the local ones, order=http://127.0.0.1:8080,…)")
	token := fs.String("token", "", "an operator's bearer `token` for the admin API (default: $CHOREO_TOKEN, else one signed with the development key, if there is one)")
	asJSON := fs.Bool("json", false, "print the services' JSON answers instead of tables")

	sub := flag.NewFlagSet("choreoctl", flag.ContinueOnError)
	sub.SetOutput(errOut)
	service := sub.String("service", "", "the `service` (default: every one, where the command allows)")
	order := sub.String("order", "", "the order (the parked key) by its `id`")
	event := sub.String("event", "", "the event by its `id`")
	row := sub.Int64("row", 0, "the parked row's `number` (with -service)")
	id := sub.Int64("id", 0, "the outbox row's `id` (outbox-retry, with -service)")
	subject := sub.String("sub", "", "the token's subject: a customer's `id` (token)")
	operator := sub.Bool("operator", false, "give the token the operator role (token)")
	ttl := sub.Duration("ttl", time.Hour, "how long the token is good for (token)")

	usage := func() {
		fmt.Fprint(errOut, commands, "\nflags before the command:\n")
		fs.PrintDefaults()
		fmt.Fprintln(errOut, "\nflags after it:")
		sub.PrintDefaults()
	}
	fs.Usage, sub.Usage = usage, usage
	if err := fs.Parse(args); err != nil {
		return err
	}
	services, err := parseServices(cmp.Or(*servicesFlag, getenv("CHOREO_SERVICES"), defaultServices))
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		usage()
		return errors.New("no command")
	}
	if fs.Arg(0) == "kafka-acls" { // talks to Kafka, not to the services
		return kafkaACLs(ctx, fs.Args()[1:], getenv, out, errOut)
	}
	if fs.Arg(0) == "connect-register" { // talks to Kafka Connect and the databases
		return connectRegister(ctx, fs.Args()[1:], getenv, out, errOut)
	}
	if fs.Arg(0) == "connect-remove" {
		return connectRemove(ctx, fs.Args()[1:], getenv, out, errOut)
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if err := sub.Parse(rest); err != nil {
		return err
	}
	switch cmd {
	case "dev-key", "token":
		return devToken(getenv, out, cmd, *subject, *operator, *ttl)
	}
	tok, err := operatorToken(cmp.Or(*token, getenv("CHOREO_TOKEN")), getenv)
	if err != nil {
		return err
	}
	c := &client{http: &http.Client{Timeout: time.Minute}, token: tok, services: services, out: out, json: *asJSON}
	targets, err := c.pick(*service)
	if err != nil {
		return err
	}
	switch cmd {
	case "parked", "dead-letters":
		return c.list(ctx, targets, *order, cmd == "dead-letters")
	case "replay", "release":
		q := url.Values{}
		switch {
		case *order != "" && *event == "" && *row == 0:
			q.Set("order", *order)
		case *event != "" && *order == "" && *row == 0:
			q.Set("event", *event)
		case *row > 0 && *order == "" && *event == "" && *service != "":
			q.Set("row", fmt.Sprint(*row))
		default:
			return fmt.Errorf("%s: select by one of -order, -event and -row (-row needs -service)", cmd)
		}
		return c.resolve(ctx, targets, cmd, q, *service != "", *order)
	case "outbox-refused":
		return c.refused(ctx, targets)
	case "outbox-retry":
		if *service == "" || *id <= 0 {
			return errors.New("outbox-retry: needs -service and -id")
		}
		var res map[string]any
		if err := c.do(ctx, targets[0], http.MethodPost, fmt.Sprintf("/admin/outbox/refused/%d/retry", *id), &res); err != nil {
			// Refused again: the detail is the reason, for the operator.
			var ae *apiError
			if errors.As(err, &ae) && ae.Status == http.StatusConflict {
				return fmt.Errorf("%s: %s", targets[0].name, ae.Detail)
			}
			return err
		}
		if *asJSON {
			return json.NewEncoder(out).Encode(res)
		}
		if res["retried"] == true {
			fmt.Fprintf(out, "%s: outbox row %d back in line; the relay publishes it now\n", targets[0].name, *id)
		} else {
			fmt.Fprintf(out, "%s: outbox row %d was not refused; nothing to do\n", targets[0].name, *id)
		}
		return nil
	default:
		usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}

type service struct{ name, url string }

func parseServices(s string) ([]service, error) {
	var out []service
	for _, part := range strings.Split(s, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("-services: %q is not name=url", part)
		}
		if _, err := url.ParseRequestURI(u); err != nil {
			return nil, fmt.Errorf("-services: %s: %w", name, err)
		}
		out = append(out, service{name: name, url: strings.TrimRight(u, "/")})
	}
	return out, nil
}

// operatorToken is given if not empty, else an operator's token signed
// for a minute with the development key if there is one (devkey.Dir),
// else "": the services then answer 401, which says so.
func operatorToken(given string, getenv func(string) string) (string, error) {
	if given != "" {
		return given, nil
	}
	dir, err := devkey.Dir(getenv)
	if err != nil {
		return "", nil
	}
	if _, err := os.Stat(filepath.Join(dir, bearer.PrivateKeyFile)); err != nil {
		return "", nil // no development key: not a local mode
	}
	k, err := devkey.Open(dir)
	if err != nil {
		return "", err
	}
	return k.Token("choreoctl", true, time.Minute)
}

// devToken serves dev-key, which prints the services' settings that
// accept the development key's tokens, and token, which prints one.
func devToken(getenv func(string) string, out io.Writer, cmd, subject string, operator bool, ttl time.Duration) error {
	dir, err := devkey.Dir(getenv)
	if err != nil {
		return err
	}
	k, err := devkey.Open(dir)
	if err != nil {
		return err
	}
	if cmd == "dev-key" {
		for _, kv := range k.Env() {
			fmt.Fprintln(out, kv)
		}
		return nil
	}
	if !events.ValidID(subject) || ttl <= 0 {
		return fmt.Errorf("token: needs -sub, %s, and a positive -ttl", events.IDRule)
	}
	tok, err := k.Token(subject, operator, ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, tok)
	return nil
}

type client struct {
	http     *http.Client
	token    string
	services []service
	out      io.Writer
	json     bool
}

// pick returns the named service, or every one.
func (c *client) pick(name string) ([]service, error) {
	if name == "" {
		return c.services, nil
	}
	i := slices.IndexFunc(c.services, func(s service) bool { return s.name == name })
	if i < 0 {
		return nil, fmt.Errorf("no service %q (have %v)", name, c.services)
	}
	return c.services[i : i+1], nil
}

// apiError is a problem+json answer.
type apiError struct {
	Status int
	Detail string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Detail) }

// do calls the admin API of s and decodes the JSON answer into v.
func (c *client) do(ctx context.Context, s service, method, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if method == http.MethodPost {
		req.Header.Set(park.AdminHeader, "choreoctl")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		if p.Detail == "" {
			p.Detail = string(bytes.TrimSpace(body))
		}
		return &apiError{Status: resp.StatusCode, Detail: p.Detail}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func (c *client) list(ctx context.Context, targets []service, order string, failuresOnly bool) error {
	path := "/admin/parked"
	if order != "" {
		path += "?order=" + url.QueryEscape(order)
	}
	empty := "nothing parked"
	if failuresOnly {
		empty = "no dead letters"
	}
	return listAll(ctx, c, targets, path, "SERVICE\tORDER\tROW\tEVENT\tTYPE\tORIGIN\tPARKED AT\tREASON", empty,
		func(s service, r park.Row) (string, bool) {
			if failuresOnly && r.Reason == nil {
				return "", false
			}
			reason := "parked behind the failure above"
			if r.Reason != nil {
				reason = *r.Reason
			}
			return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s/%d/%d\t%s\t%s", s.name, deref(r.Key, "-"), r.Seq, deref(r.EventID, "-"), deref(r.EventType, "-"),
				r.Topic, r.Partition, r.Offset, r.ParkedAt.Format(time.RFC3339), oneLine(reason)), true
		})
}

// listAll prints, as a table or as JSON lines, the rows that GET path
// answers on every target; line formats one (false: leave it out). With
// no row to show, a table says empty instead — "nothing parked" — for
// the services that answered.
func listAll[R any](ctx context.Context, c *client, targets []service, path, header, empty string, line func(service, R) (string, bool)) error {
	var table bytes.Buffer
	w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	rows := 0
	var answered []service
	var errs []error
	for _, s := range targets {
		var res struct {
			Rows []R `json:"rows"`
		}
		if err := c.do(ctx, s, http.MethodGet, path, &res); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			continue
		}
		answered = append(answered, s)
		for _, r := range res.Rows {
			l, ok := line(s, r)
			switch {
			case !ok:
			case c.json:
				if err := json.NewEncoder(c.out).Encode(r); err != nil {
					return err
				}
			default:
				rows++
				fmt.Fprintln(w, l)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case c.json:
	case rows > 0:
		if _, err := table.WriteTo(c.out); err != nil {
			return err
		}
	case len(answered) == len(targets):
		fmt.Fprintln(c.out, empty)
	case len(answered) > 0:
		fmt.Fprintf(c.out, "%s on %s\n", empty, names(answered))
	}
	return errors.Join(errs...)
}

// resolve replays or releases the selected rows on every target that has
// them; with one service named, its answer is the answer.
//
// Releasing an order releases the rows listed when the command starts, and
// no row parked since: those stay parked for the operator to look at.
func (c *client) resolve(ctx context.Context, targets []service, cmd string, q url.Values, named bool, order string) error {
	found := false
	var errs []error
	for _, s := range targets {
		if cmd == "release" && order != "" {
			var listed struct {
				Rows []park.Row `json:"rows"`
			}
			if err := c.do(ctx, s, http.MethodGet, "/admin/parked?limit=10000&order="+url.QueryEscape(order), &listed); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
				continue
			}
			if n := len(listed.Rows); n > 0 {
				q.Set("through", fmt.Sprint(listed.Rows[n-1].Seq))
			} else {
				q.Del("through")
			}
		}
		var res park.Report
		err := c.do(ctx, s, http.MethodPost, "/admin/parked/"+cmd+"?"+q.Encode(), &res)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound && !named {
			continue // never parked there
		}
		found = true
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			continue
		}
		if c.json {
			if err := json.NewEncoder(c.out).Encode(res); err != nil {
				return err
			}
			continue
		}
		for _, r := range res.Resolved {
			fmt.Fprintf(c.out, "%s: row %d %s %s of order %s: %s\n", s.name, r.Seq, deref(r.EventType, "message"), deref(r.EventID, ""), deref(r.Key, "-"), r.Outcome)
		}
		for _, r := range res.Already {
			fmt.Fprintf(c.out, "%s: row %d %s %s of order %s: already %s at %s\n", s.name, r.Seq, deref(r.EventType, "message"), deref(r.EventID, ""), deref(r.Key, "-"),
				deref(r.Resolution, "resolved"), r.ResolvedAt.Format(time.RFC3339))
		}
		if len(res.Resolved) == 0 && len(res.Already) == 0 {
			fmt.Fprintf(c.out, "%s: nothing to %s\n", s.name, cmd)
		}
	}
	if !found {
		return fmt.Errorf("%s: nothing matching %s was ever parked by %s", cmd, q.Encode(), names(targets))
	}
	return errors.Join(errs...)
}

func (c *client) refused(ctx context.Context, targets []service) error {
	return listAll(ctx, c, targets, "/admin/outbox/refused", "SERVICE\tID\tTOPIC\tKEY\tBYTES\tREFUSED AT\tLAST ERROR", "no outbox rows refused",
		func(s service, r outbox.RefusedRow) (string, bool) {
			return fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%s\t%s", s.name, r.ID, r.Topic, r.Key, r.Bytes, r.RefusedAt.Format(time.RFC3339), oneLine(r.LastError)), true
		})
}

func names(ss []service) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func deref(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
