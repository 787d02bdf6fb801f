// This file holds the one rule for text headed for the outbox's text and
// jsonb columns: valid UTF-8 without NUL.

package outbox

import (
	"strings"
	"unicode/utf8"
)

// StorableText returns s as PostgreSQL can store it in text and jsonb —
// valid UTF-8 without NUL, other bytes replaced by U+FFFD — and whether that
// changed it. Header values and reasons headed for the outbox go through it.
func StorableText(s string) (string, bool) { return cleanText(s) }

func cleanText(s string) (string, bool) {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s, false
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), true
}
