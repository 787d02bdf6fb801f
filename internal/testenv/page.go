package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Page is a page open in headless Chromium that a test acts on — types into
// it, measures it — where DumpDOM only reads what its scripts leave. It
// speaks the DevTools protocol over the pipe Chromium opens with
// --remote-debugging-pipe (JSON messages ended by NUL on fds 3 and 4), so
// it needs no client library and no port.
type Page struct {
	t       testing.TB
	send    *os.File
	session string

	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpReply
	readErr error
}

type cdpReply struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// OpenPage starts headless Chromium with a 1280×900 window, loads url and
// waits until the document has loaded. Chromium stops when the test ends.
// Without Chromium the test fails and says how to install it.
func OpenPage(t testing.TB, url string) *Page {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("headless Chromium is needed to test the page: apt-get install -y chromium (scripts/test.sh installs it): %v", err)
	}
	toChrome, chromeIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	// The same flags as DumpDOM's: off the network, out of the sandbox.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "--window-size=1280,900", "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3: Chromium reads; fd 4: it writes
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	p := &Page{t: t, send: chromeIn, pending: map[int]chan cdpReply{}}
	go p.read(chromeOut)
	t.Cleanup(func() {
		_, _ = p.call("", "Browser.close", nil)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel() // kills it
			<-done
		}
		cancel()
		chromeIn.Close()
		chromeOut.Close()
		if t.Failed() {
			// Chromium complains of the D-Bus a container lacks; the rest may tell why.
			var lines []string
			for _, l := range strings.Split(stderr.String(), "\n") {
				if l != "" && !strings.Contains(l, "dbus") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				t.Logf("chromium stderr:\n%s", strings.Join(lines, "\n"))
			}
		}
	})

	var target struct {
		TargetID string `json:"targetId"`
	}
	p.must("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	p.must("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	p.session = attached.SessionID
	p.must(p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil)
	p.must(p.session, "Page.navigate", map[string]any{"url": url}, nil)
	p.WaitFor("the page has loaded", `document.readyState === "complete" && location.href !== "about:blank"`)
	return p
}

// read hands each reply to the call waiting for it; events are dropped.
func (p *Page) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			p.mu.Lock()
			p.readErr = err
			for id, ch := range p.pending {
				close(ch)
				delete(p.pending, id)
			}
			p.mu.Unlock()
			return
		}
		var rep cdpReply
		if json.Unmarshal(msg[:len(msg)-1], &rep) != nil || rep.ID == 0 {
			continue
		}
		p.mu.Lock()
		ch := p.pending[rep.ID]
		delete(p.pending, rep.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

// call sends one command, to the browser (session "") or the page, and
// waits up to 30 s for its reply.
func (p *Page) call(session, method string, params any) (json.RawMessage, error) {
	p.mu.Lock()
	if p.readErr != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: chromium has closed its pipe: %v", method, p.readErr)
	}
	p.nextID++
	id := p.nextID
	ch := make(chan cdpReply, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := p.send.Write(append(b, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case rep, ok := <-ch:
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: chromium closed its pipe", method)
		case rep.Error != nil:
			return nil, fmt.Errorf("%s: %s", method, rep.Error.Message)
		}
		return rep.Result, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no reply within 30 s", method)
	}
}

func (p *Page) must(session, method string, params, out any) {
	p.t.Helper()
	res, err := p.call(session, method, params)
	if err != nil {
		p.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			p.t.Fatalf("%s: decode %s: %v", method, res, err)
		}
	}
}

// Eval runs the JavaScript expression expr in the page, awaiting it if it
// is a promise, and decodes its value, which must be JSON, into out (if
// not nil). A thrown exception fails the test.
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	p.must(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
	if res.Exception != nil {
		p.t.Fatalf("evaluate %s: %s %s", expr, res.Exception.Text, res.Exception.Exception.Description)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			p.t.Fatalf("evaluate %s: decode %s: %v", expr, res.Result.Value, err)
		}
	}
}

// WaitFor polls the expression cond until it is true, for up to 30 s.
func (p *Page) WaitFor(what, cond string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		p.Eval("Boolean("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var html string
			p.Eval("document.documentElement.outerHTML", &html)
			p.t.Fatalf("timed out waiting for %s (%s)\nDOM:\n%s", what, cond, html)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Type focuses the element selector finds and types text into it, a key
// at a time, as a person would: each key fires the input events.
func (p *Page) Type(selector, text string) {
	p.t.Helper()
	var found bool
	p.Eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.focus(); return true; })()`, selector), &found)
	if !found {
		p.t.Fatalf("type into %s: no such element", selector)
	}
	for _, r := range text {
		for _, typ := range []string{"keyDown", "keyUp"} {
			params := map[string]any{"type": typ, "key": string(r)}
			if typ == "keyDown" {
				params["text"] = string(r)
			}
			p.must(p.session, "Input.dispatchKeyEvent", params, nil)
		}
	}
}
