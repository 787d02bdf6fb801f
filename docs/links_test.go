// Package docs_test keeps the documentation honest. The pages link to the
// code and name the tests that guard each guarantee; code moves and tests
// get renamed, and a page that points at nothing teaches the wrong thing.
// These tests fail when that happens.
package docs_test

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root as seen from this package's directory,
// which is where go test runs the test binary.
const repoRoot = ".."

// pages returns the Markdown files whose links are checked: the repository
// README and every page in docs/ and docs/appendix/.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	appendix, err := filepath.Glob("appendix/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, appendix...)
	if len(docs) == 0 {
		t.Fatal("no *.md files found in docs/")
	}
	sort.Strings(docs)
	return append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
}

// display names a page by its path from the repository root, e.g.
// docs/saga.md, so README.md and docs/README.md are told apart.
func display(page string) string {
	return filepath.ToSlash(filepath.Join("docs", page))
}

// line is one line of prose: a Markdown line outside fenced code blocks.
type line struct {
	n    int // 1-based line number
	text string
}

// prose reads path and returns its lines outside fenced code blocks, where
// neither links nor headings are Markdown.
func prose(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []line
		fence string // the opening fence while inside a code block
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimLeft(text, " \t")
		if marker := fenceMarker(trimmed); marker != "" {
			switch {
			case fence == "":
				fence = marker
				continue
			case strings.HasPrefix(marker, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, marker[:1])) == "":
				fence = ""
				continue
			}
		}
		if fence == "" {
			out = append(out, line{n, text})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

// fenceMarker returns the run of ``` or ~~~ (three or more) that s starts
// with, or "".
func fenceMarker(s string) string {
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

var (
	codeSpan     = regexp.MustCompile("``[^`]*``|`[^`]*`")
	refDef       = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	atxHeading   = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor   = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
	testInTicks  = regexp.MustCompile("`(Test[A-Z0-9_][A-Za-z0-9_]*)`")
	testFuncDecl = regexp.MustCompile(`(?m)^func\s+(Test[A-Za-z0-9_]*)\s*\(`)
)

// link is a link destination found on a line.
type link struct {
	line   int
	target string
}

// links returns the destinations of the inline links and images, and of the
// reference definitions, in lines. Code spans are removed first, so code
// that happens to contain "](" is not mistaken for a link.
func links(lines []line) []link {
	var out []link
	for _, l := range lines {
		text := codeSpan.ReplaceAllString(l.text, "")
		if m := refDef.FindStringSubmatch(text); m != nil {
			out = append(out, link{l.n, strings.Trim(m[1], "<>")})
			continue
		}
		for i := 0; ; {
			j := strings.Index(text[i:], "](")
			if j < 0 {
				break
			}
			start := i + j + 2
			dest, end := destination(text[start:])
			out = append(out, link{l.n, dest})
			i = start + end
		}
	}
	return out
}

// destination parses an inline link destination at the start of s, which
// follows "](": <...>, or a run of text with balanced parentheses, optionally
// followed by a title. It returns the destination and how much of s it read.
func destination(s string) (string, int) {
	lead := len(s) - len(strings.TrimLeft(s, " \t"))
	rest := s[lead:]
	if strings.HasPrefix(rest, "<") {
		if end := strings.Index(rest, ">"); end > 0 {
			return rest[1:end], lead + end + 1
		}
	}
	depth := 0
	for i, r := range rest {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return rest[:i], lead + i + 1
		case r == ')':
			depth--
		case unicode.IsSpace(r) && depth == 0:
			// A title follows; the destination ends here.
			if end := strings.Index(rest[i:], ")"); end >= 0 {
				return rest[:i], lead + i + end + 1
			}
			return rest[:i], len(s)
		}
	}
	return strings.TrimSpace(rest), len(s)
}

// external reports whether target leaves the repository.
func external(target string) bool {
	lower := strings.ToLower(target)
	return strings.Contains(lower, "://") || strings.HasPrefix(lower, "//") ||
		strings.HasPrefix(lower, "mailto:") || strings.HasPrefix(lower, "tel:") || strings.HasPrefix(lower, "data:")
}

// slug turns a heading into its anchor the way GitHub does: the rendered
// text (code spans and links reduced to their text), lower-cased, with
// everything but letters, digits, spaces, hyphens and underscores removed,
// and spaces turned into hyphens.
func slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors returns the anchors a Markdown file defines: one per ATX heading
// (with GitHub's -1, -2 … suffixes for repeats) and any HTML name or id.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(t, path) {
		if m := atxHeading.FindStringSubmatch(l.text); m != nil {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				out[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				out[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// checkLink reports what is wrong with target, a link in the Markdown file
// page, or nil. A target into a Markdown file may name a heading; into any
// other file (e.g. relay.go#L201) only the file is checked.
func checkLink(t *testing.T, page, target string, anchorCache map[string]map[string]bool) error {
	t.Helper()
	if target == "" {
		return fmt.Errorf("empty link")
	}
	path, anchor, _ := strings.Cut(target, "#")
	if i := strings.Index(path, "?"); i >= 0 {
		path = path[:i]
	}
	file := page
	if path != "" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return fmt.Errorf("bad escape: %v", err)
		}
		if filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
			return fmt.Errorf("absolute path; use a path relative to %s", filepath.Dir(page))
		}
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(p))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("target does not exist: %s", file)
		}
	}
	if anchor == "" || !strings.EqualFold(filepath.Ext(file), ".md") {
		return nil
	}
	a, ok := anchorCache[file]
	if !ok {
		a = anchors(t, file)
		anchorCache[file] = a
	}
	if !a[anchor] {
		return fmt.Errorf("no heading with anchor #%s in %s", anchor, file)
	}
	return nil
}

// TestRelativeLinksResolve checks every relative link in README.md and
// docs/*.md: the file or directory exists, and an #anchor into a Markdown
// file names one of its headings.
func TestRelativeLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range links(prose(t, page)) {
			if external(l.target) {
				continue
			}
			checked++
			if err := checkLink(t, page, l.target, cache); err != nil {
				t.Errorf("%s:%d: link %q: %v", display(page), l.line, l.target, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative links at all; the link scanner is broken")
	}
	t.Logf("checked %d relative links", checked)
}

// testFuncs returns the names of the Test functions declared in the
// repository's *_test.go files.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFuncDecl.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("found no test functions; the scanner is broken")
	}
	return names
}

// TestNamedTestsExist checks that every `TestXxx` a page names is a test
// function somewhere in the repository, so a page never sends a reader to a
// guarantee's test that was renamed or deleted.
func TestNamedTestsExist(t *testing.T) {
	have := testFuncs(t)
	named := 0
	for _, page := range pages(t)[1:] { // docs/*.md only
		for _, l := range prose(t, page) {
			for _, m := range testInTicks.FindAllStringSubmatch(l.text, -1) {
				named++
				if !have[m[1]] {
					t.Errorf("%s:%d: names test %s, but no *_test.go declares func %s", display(page), l.n, m[1], m[1])
				}
			}
		}
	}
	if named == 0 {
		t.Fatal("the pages name no tests at all; the scanner is broken")
	}
	t.Logf("checked %d test names", named)
}

// TestSlug pins the anchor algorithm the link check relies on to GitHub's
// behaviour for the kinds of headings these pages use.
func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Rebalance", "rebalance"},
		{"ON CONFLICT DO NOTHING under concurrency", "on-conflict-do-nothing-under-concurrency"},
		{"Permanent errors: dead-letter topic", "permanent-errors-dead-letter-topic"},
		{"Compensation: out of stock → refund", "compensation-out-of-stock--refund"},
		{"Payment ([`DecideCharge`, `DecideRefund`](../services/payment/internal/domain/domain.go))", "payment-decidecharge-deciderefund"},
		{"The seed incident: charged twice at 3 a.m.", "the-seed-incident-charged-twice-at-3-am"},
		{"snake_case stays", "snake_case-stays"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// TestLinkScanner pins the scanner on the link shapes the pages use, so a
// broken scanner cannot pass the real check by finding nothing.
func TestLinkScanner(t *testing.T) {
	lines := []line{
		{1, "See [`pkg/idem`](../pkg/idem/idem.go) and [saga](saga.md#event-flow)."},
		{2, "Code `m[i](x)` is not a link, ![img](a.png \"title\") is."},
		{3, "[ref]: ../README.md"},
		{4, "[nested](a_(b).md) and <https://example.com> and [x](<with space.md>)"},
	}
	var got []string
	for _, l := range links(lines) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"1:../pkg/idem/idem.go", "1:saga.md#event-flow", "2:a.png", "3:../README.md", "4:a_(b).md", "4:with space.md"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("links = %q, want %q", got, want)
	}
}
