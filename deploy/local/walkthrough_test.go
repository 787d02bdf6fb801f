package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/tracker"
)

// TestWalkthrough follows the README's walkthrough to the letter, in the mode
// it names: it starts `go run ./deploy/local 2>local.log` (run, in this
// process, on free ports), runs every command of the walkthrough's code
// blocks with sh, in order, and compares what each prints with the output
// the README shows under it (see matchOutput for what may differ). A README
// edit that changes an answer, or a change of the system that changes one,
// fails here.
func TestWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the walkthrough's commands are curl commands, and curl is not installed")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseWalkthrough(string(readme))
	if err != nil {
		t.Fatal(err)
	}

	// The README's ports, each mapped to a free one so the test runs beside
	// anything on 8080-8089 or 9092.
	ports := freePorts(t, 8)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	args := []string{"-kafka-addr", addr(0), "-pg-port", strconv.Itoa(ports[1])}
	hosts := map[string]string{} // "localhost:8080" → "127.0.0.1:<free>"
	for i, s := range []struct{ flag, readmeAddr string }{
		{"-order-addr", order.DefaultConfig().HTTPAddr},
		{"-payment-addr", payment.DefaultConfig().HTTPAddr},
		{"-inventory-addr", inventory.DefaultConfig().HTTPAddr},
		{"-shipping-addr", shipping.DefaultConfig().HTTPAddr},
		{"-tracker-addr", tracker.DefaultConfig().HTTPAddr},
		{"-control-addr", defaultControlAddr},
	} {
		_, port, err := net.SplitHostPort(s.readmeAddr)
		if err != nil {
			t.Fatal(err)
		}
		hosts["localhost:"+port] = addr(i + 2)
		args = append(args, s.flag, addr(i+2))
	}

	dir := t.TempDir()
	keyDir := filepath.Join(dir, "dev-key")
	args = append(args, "-dev-key-dir", keyDir, "-kafka-admin-file", filepath.Join(dir, "kafka-admin-password"))
	logPath := filepath.Join(dir, "local.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(string) string { return "" }, &stdout, logFile) }()
	for !strings.Contains(stdout.String(), "Choreo is running") {
		select {
		case err := <-done:
			t.Fatalf("run returned before ready: %v (log: %s)", err, logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after cancel: %v", err)
			}
		case <-time.After(90 * time.Second):
			t.Error("run did not return within 90s of cancel")
		}
	}()

	// The README's commands find the broker on its default address and
	// the development key in the user's cache; here the broker is on a
	// free port and the key in the test's directory, told as the tools
	// read them.
	env := append(os.Environ(), "KAFKA_BROKERS="+addr(0), devkey.EnvDir+"="+keyDir,
		// and log in as the README's reader does, with no Kafka user in the
		// environment: as the administrator whose password deploy/local
		// wrote down.
		"KAFKA_USERNAME=", "KAFKA_PASSWORD=", "KAFKA_PASSWORD_FILE=", "CHOREO_KAFKA_ADMIN_FILE="+filepath.Join(dir, "kafka-admin-password"))
	for _, s := range steps {
		command, err := s.rewrite(hosts, logPath)
		if err != nil {
			t.Fatal(err)
		}
		if s.assign != "" {
			// NAME=$(command): what it prints is NAME's value in the
			// commands that follow, as in the reader's shell.
			cmd := exec.CommandContext(ctx, "sh", "-c", command)
			cmd.Dir, cmd.Env = "../..", env
			out, err := cmd.Output()
			value := strings.TrimSpace(string(out))
			if err != nil || value == "" {
				t.Fatalf("README.md:%d: %s printed %q: %v", s.line, s.command, value, err)
			}
			env = append(env, s.assign+"="+value)
			continue
		}
		// A command that changes something runs once; one that only reads
		// is repeated until it shows what the README shows, as a reader
		// who waits "some 60 ms" would see it, or until the bound.
		deadline := time.Now()
		if !s.changes() {
			deadline = deadline.Add(20 * time.Second)
		}
		for {
			cmd := exec.CommandContext(ctx, "sh", "-c", command)
			cmd.Dir, cmd.Env = "../..", env
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			runErr := cmd.Run()
			got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if matchOutput(s.want, got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("README.md:%d: %s\nprinted (exit: %v, stderr: %q):\n%s\nthe README shows:\n%s",
					s.line, s.command, runErr, errOut.String(), strings.Join(got, "\n"), strings.Join(s.want, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("%d commands of the README's walkthrough answered as it shows", len(steps))
}

// step is one command of the walkthrough and the output shown under it.
type step struct {
	line    int    // README line the command starts on
	command string // as shown, continuation lines included
	want    []string
	// assign is NAME of a line NAME=$(command), which shows no output:
	// command's is NAME's value for the steps after it.
	assign string
}

// assignment matches NAME=$(command) on a line of its own.
var assignment = regexp.MustCompile(`^([A-Z_]+)=\$\((.+)\)$`)

// commandWords are the programs the walkthrough runs; a line of a code
// block that starts with one begins a command, any other is output.
var commandWords = map[string]bool{"curl": true, "go": true, "grep": true}

// parseWalkthrough returns the commands of the code blocks under README's
// "## Walkthrough", each with the output lines shown after it. A command
// goes on while a line ends in a backslash or inside an open quote;
// comment lines are skipped; blank lines within an output are kept (the
// one between headers and body) and trailing ones dropped.
func parseWalkthrough(readme string) ([]step, error) {
	var (
		steps        []step
		section, sh  bool
		cur          *step
		continuation bool
	)
	flush := func() {
		if cur == nil {
			return
		}
		for len(cur.want) > 0 && cur.want[len(cur.want)-1] == "" {
			cur.want = cur.want[:len(cur.want)-1]
		}
		steps = append(steps, *cur)
		cur = nil
	}
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## Walkthrough"
			continue
		case !section:
			continue
		case !sh:
			sh = line == "```sh"
			continue
		case line == "```":
			flush()
			sh = false
			continue
		}
		if continuation {
			cur.command += "\n" + line
			continuation = continues(cur.command)
			continue
		}
		fields := strings.Fields(line)
		if m := assignment.FindStringSubmatch(line); m != nil {
			flush()
			steps = append(steps, step{line: i + 1, command: m[2], assign: m[1]})
			continue
		}
		switch {
		case len(fields) > 0 && strings.HasPrefix(fields[0], "#"):
		case len(fields) > 0 && commandWords[fields[0]]:
			flush()
			cur = &step{line: i + 1, command: line}
			continuation = continues(line)
		case cur == nil && line != "":
			return nil, fmt.Errorf("README.md:%d: output before any command: %s", i+1, line)
		case cur != nil:
			cur.want = append(cur.want, line)
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("README.md: no commands under ## Walkthrough")
	}
	for _, s := range steps {
		if len(s.want) == 0 && s.assign == "" {
			return nil, fmt.Errorf("README.md:%d: no output shown for %s", s.line, s.command)
		}
	}
	return steps, nil
}

// continues reports whether a shell command needs another line: it ends in
// a backslash or inside a quote. A # that starts a word comments out the
// rest of its line, so the apostrophe of a comment opens no quote.
func continues(command string) bool {
	var quote rune
	escaped, comment, wordStart := false, false, true
	for _, r := range command {
		switch {
		case comment:
			comment = r != '\n'
		case escaped:
			escaped = false
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\\':
			escaped = true
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && wordStart:
			comment = true
		}
		wordStart = r == ' ' || r == '\t' || r == '\n'
	}
	return quote != 0 || escaped
}

// changes reports whether the step changes the system (an HTTP write, a
// tool that produces messages); a read may be repeated until it matches.
func (s step) changes() bool {
	return write.MatchString(s.command) || strings.HasPrefix(s.command, "go run ")
}

var write = regexp.MustCompile(`-X (POST|PUT|PATCH|DELETE)\b`)

// localhostPort finds the README's addresses in a command.
var localhostPort = regexp.MustCompile(`localhost:\d+`)

// rewrite points the command at the ports the test chose and at its log
// file, and fails on an address the test did not start anything on.
func (s step) rewrite(hosts map[string]string, logPath string) (string, error) {
	var unknown []string
	command := localhostPort.ReplaceAllStringFunc(s.command, func(h string) string {
		to, ok := hosts[h]
		if !ok {
			unknown = append(unknown, h)
		}
		return to
	})
	if unknown != nil {
		return "", fmt.Errorf("README.md:%d: %v: no service of deploy/local there", s.line, unknown)
	}
	return strings.ReplaceAll(command, "local.log", logPath), nil
}

var (
	eventID = regexp.MustCompile(`("event_id":"|\bevent )[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	offset  = regexp.MustCompile(`\boffset \d+`)
	blanks  = regexp.MustCompile(`[ \t]+`)
)

// normaliseLine masks what differs from run to run though the README shows
// it: event ids (random; an order's id is not, and is compared), Kafka
// offsets (they depend on the partition an order's key lands on), the
// padding around them, and curl's CR. Times, dates and request ids the
// README itself elides with "…".
func normaliseLine(l string) string {
	l = strings.TrimRight(l, "\r \t")
	l = eventID.ReplaceAllString(l, "${1}<event-id>")
	l = offset.ReplaceAllString(l, "offset <n>")
	return blanks.ReplaceAllString(l, " ")
}

// elidedHeaders is a line of the README standing for some header lines,
// such as "…   (X-Request-Id, Date, Content-Length)".
var elidedHeaders = regexp.MustCompile(`^…\s*\(([^)]*)\)$`)

// matchOutput reports whether got is what the README shows as want, after
// normaliseLine: exact, but that "…" within a line stands for any text, and
// a line "… (A, B)" for exactly the header lines A and B, in any order.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	w := normaliseLine(want[0])
	if m := elidedHeaders.FindStringSubmatch(w); m != nil {
		names := strings.Split(m[1], ",")
		if len(got) < len(names) {
			return false
		}
		left := map[string]bool{}
		for _, n := range names {
			left[strings.ToLower(strings.TrimSpace(n))] = true
		}
		for _, g := range got[:len(names)] {
			name, _, ok := strings.Cut(g, ":")
			if !ok || !left[strings.ToLower(name)] {
				return false
			}
			delete(left, strings.ToLower(name))
		}
		return matchOutput(want[1:], got[len(names):])
	}
	if len(got) == 0 {
		return false
	}
	parts := strings.Split(w, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	return re.MatchString(normaliseLine(got[0])) && matchOutput(want[1:], got[1:])
}

// TestParseWalkthrough: commands run on over a backslash or an open quote,
// comments (apostrophes and all) are no output, the blank line between
// headers and body is kept, and NAME=$(command) is a step that shows no
// output but sets NAME.
func TestParseWalkthrough(t *testing.T) {
	readme := strings.Join([]string{
		"## Run it", "```sh", "curl -s localhost:1/not-the-walkthrough", "no", "```",
		"## Walkthrough", "text", "```sh",
		"# a comment line",
		"curl -si -X POST localhost:8080/orders \\",
		`  -d '{"a":1,`,
		`       "b":2}'`,
		"HTTP/1.1 201 Created",
		"",
		`{"id":"x"}`,
		"",
		"curl -s localhost:8080/orders/x    # the order's state, later",
		`{"status":"COMPLETED"}`,
		`TOKEN=$(go run ./cmd/choreoctl token -sub c-1)`,
		`curl -s localhost:8080/orders -H "Authorization: Bearer $TOKEN"`,
		`{"orders":[]}`,
		"```",
		"## Links", "```sh", "curl -s localhost:2/after", "no", "```",
	}, "\n")
	steps, err := parseWalkthrough(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{line: 10, command: "curl -si -X POST localhost:8080/orders \\\n  -d '{\"a\":1,\n       \"b\":2}'", want: []string{"HTTP/1.1 201 Created", "", `{"id":"x"}`}},
		{line: 17, command: "curl -s localhost:8080/orders/x    # the order's state, later", want: []string{`{"status":"COMPLETED"}`}},
		{line: 19, command: "go run ./cmd/choreoctl token -sub c-1", assign: "TOKEN"},
		{line: 20, command: `curl -s localhost:8080/orders -H "Authorization: Bearer $TOKEN"`, want: []string{`{"orders":[]}`}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("parseWalkthrough =\n%#v\nwant\n%#v", steps, want)
	}
	if !steps[0].changes() || steps[1].changes() {
		t.Error("a POST must run once and a GET may repeat")
	}

	t.Run("CommandWithoutOutput", func(t *testing.T) {
		if _, err := parseWalkthrough("## Walkthrough\n```sh\ncurl -s localhost:8080/a\n```\n"); err == nil {
			t.Error("a command the README shows no answer for was accepted")
		}
	})
	t.Run("UnknownPort", func(t *testing.T) {
		if _, err := (step{command: "curl localhost:9999/x"}).rewrite(map[string]string{"localhost:8080": "127.0.0.1:1"}, "l"); err == nil {
			t.Error("a command to a port deploy/local does not serve was accepted")
		}
	})
}

// TestMatchOutput: a README answer matches exactly but for "…", header
// elisions and the masked event ids and offsets; any other change fails.
func TestMatchOutput(t *testing.T) {
	headers := []string{"HTTP/1.1 200 OK", "Etag: \"7\"", "…        (X-Request-Id, Date)", "", `{"available":13}`}
	tests := []struct {
		name      string
		want, got []string
		match     bool
	}{
		{"Exact", []string{`{"balance":5000}`}, []string{`{"balance":5000}`}, true},
		{"AmountDrifted", []string{`{"balance":5000}`}, []string{`{"balance":2500}`}, false},
		{"EllipsisIsAnyText", []string{`{"id":"92113d6b-…",…,"status":"COMPLETED",…}`}, []string{`{"id":"92113d6b-9b71","total":1,"status":"COMPLETED","x":2}`}, true},
		{"EllipsisDoesNotHideAStatus", []string{`{"id":"92113d6b-…",…,"status":"COMPLETED",…}`}, []string{`{"id":"92113d6b-9b71","status":"CANCELLED","x":2}`}, false},
		{"OtherOrderID", []string{`{"id":"92113d6b-…"}`}, []string{`{"id":"f5de7e1e-9431"}`}, false},
		{"ElidedHeaders", headers, []string{"HTTP/1.1 200 OK\r", "Etag: \"7\"\r", "Date: now\r", "X-Request-Id: r\r", "\r", `{"available":13}`}, true},
		{"ElidedHeaderMissing", headers, []string{"HTTP/1.1 200 OK", "Etag: \"7\"", "Date: now", "", `{"available":13}`}, false},
		{"HeaderNotElided", headers, []string{"HTTP/1.1 200 OK", "Etag: \"7\"", "Date: now", "Location: /x", "", `{"available":13}`}, false},
		{"ETagDrifted", headers, []string{"HTTP/1.1 200 OK", "Etag: \"5\"", "Date: now", "X-Request-Id: r", "", `{"available":13}`}, false},
		{"ExtraLine", []string{"8"}, []string{"8", "9"}, false},
		{"EventIDsAndOffsetsMasked",
			[]string{`order.events      offset 0      OrderCreated       event f17cbd85-f883-4a8a-880b-70d5170e8021  x2`},
			[]string{`order.events      offset 12     OrderCreated       event 0a1b2c3d-f883-4a8a-880b-70d5170e8021  x2`}, true},
		{"EventTypeDrifted",
			[]string{`order.events offset 0 OrderCreated event f17cbd85-f883-4a8a-880b-70d5170e8021 x2`},
			[]string{`order.events offset 0 OrderCompleted event f17cbd85-f883-4a8a-880b-70d5170e8021 x2`}, false},
		{"OrderIDNotMasked", []string{`"event_id":"f17cbd85-f883-4a8a-880b-70d5170e8021","order_id":"92113d6b-9b71-5272-9e34-cd4a24e34d37"`},
			[]string{`"event_id":"00000000-f883-4a8a-880b-70d5170e8021","order_id":"00000000-9b71-5272-9e34-cd4a24e34d37"`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchOutput(tt.want, tt.got); got != tt.match {
				t.Errorf("matchOutput(%q, %q) = %v, want %v", tt.want, tt.got, got, tt.match)
			}
		})
	}
}
