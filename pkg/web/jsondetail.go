package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// decodeDetail says why body did not decode, in the client's words: where
// in the document (items[0].quantity) and what the value must be. Go's own
// message names Go types and fields ("into Go struct field
// Item.items.quantity of type int64"), which a client never sees.
func decodeDetail(body []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty; send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends in the middle of a value"
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		where := pathAt(body, typ.Offset)
		if where == "" {
			where = "the body"
		}
		return where + ": " + mustBe(typ.Type, typ.Value)
	}
	// The rest are sentences already: unknown field "colour".
	return strings.TrimPrefix(err.Error(), "json: ")
}

// mustBe says what a value of type t looks like in JSON, given what was
// sent instead (encoding/json's "number 1.5", "string", "array", …).
func mustBe(t reflect.Type, got string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	number, isNumber := strings.CutPrefix(got, "number ")
	var want string
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if isNumber {
			if _, err := strconv.ParseInt(number, 10, 64); err != nil && (!strings.ContainsAny(number, ".eE") || beyondFloat(number)) {
				return "is too large a number"
			}
			return "must be a whole number"
		}
		want = "a whole number"
	case reflect.Float32, reflect.Float64:
		if isNumber { // a JSON number fails a float only by its size
			return "is too large a number"
		}
		want = "a number"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Struct, reflect.Map:
		want = "an object"
	default:
		return "has the wrong type"
	}
	sent := map[string]string{"string": "a string", "bool": "true or false", "array": "an array", "object": "an object"}[got]
	if isNumber || got == "number" {
		sent = "a number"
	}
	if sent == "" {
		return "must be " + want
	}
	return "must be " + want + ", not " + sent
}

// beyondFloat reports whether the JSON number n is too large for a float64.
func beyondFloat(n string) bool {
	_, err := strconv.ParseFloat(n, 64)
	return errors.Is(err, strconv.ErrRange)
}

// pathAt names the value of the JSON document body that ends its first
// token at offset, as a client writes it: items[0].quantity. It is "" for
// the document itself, or when body cannot be read that far.
func pathAt(body []byte, offset int64) string {
	type frame struct {
		array bool
		index int    // array: the element being read
		key   string // object: the member being read
		inKey bool   // object: a key comes next
	}
	var stack []frame
	done := func() { // a value ended: its parent moves on
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].inKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a number beyond float64 (1e400) must not end the walk
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 && stack[n-1].inKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].inKey = key, false
				continue
			}
		}
		if tok == json.Delim('}') || tok == json.Delim(']') {
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		if dec.InputOffset() >= offset {
			var b strings.Builder
			for _, f := range stack {
				switch {
				case f.array:
					fmt.Fprintf(&b, "[%d]", f.index)
				case b.Len() > 0:
					b.WriteString("." + f.key)
				default:
					b.WriteString(f.key)
				}
			}
			return b.String()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{inKey: true})
		case json.Delim('['):
			stack = append(stack, frame{array: true})
		default:
			done()
		}
	}
}
