package protocol

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// A query's first request and the daemon's first answer are the whole of
// an in-place run's exchange, and a client that encodes and decodes them
// with encoding/json pays for its reflection (about a millisecond of a
// start that should cost a few: docs/performance.md "Starting a query").
// AppendRequest and ParseReply do the same work for the messages those
// two are, by hand; ParseReply declines (ok false) anything it does not
// read exactly as encoding/json would, and the caller then decodes the
// line with encoding/json.

// AppendRequest appends r's op, pool, progress and app, as
// encoding/json's Marshal writes them, and a newline: a query's first
// request (OpRun, OpExec). The other fields are not written: they belong
// to other requests, or to an OpRun that encoding/json writes (Bound).
func AppendRequest(b []byte, r Request) []byte {
	b = append(b, `{"op":`...)
	b = appendString(b, r.Op)
	if r.Pool != "" {
		b = append(b, `,"pool":`...)
		b = appendString(b, r.Pool)
	}
	if r.Progress {
		b = append(b, `,"progress":true`...)
	}
	if r.App != "" {
		b = append(b, `,"app":`...)
		b = appendString(b, r.App)
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it: quote, backslash and control characters, <, > and & as
// \u00XX, U+2028 and U+2029, and each byte of invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// ParseReply reads line, one JSON object (its newline may be there), as
// a Reply when it is a plain one: members with the Reply field names
// exactly as spelled in its tags, values strings without escapes,
// numbers or null, nothing nested (no Wait, no Stats). ok is false for
// anything else, valid JSON or not, and the caller decodes the line with
// encoding/json, which gives the same Reply for every line ParseReply
// takes (FuzzParseReply checks this).
func ParseReply(line []byte) (r Reply, ok bool) {
	p := scanner{b: bytes.TrimRight(line, "\n")}
	if !p.byte('{') {
		return Reply{}, false
	}
	for first := true; !p.byte('}'); first = false {
		if !first && !p.byte(',') {
			return Reply{}, false
		}
		key, ok := p.str()
		if !ok || !p.byte(':') || !p.member(&r, key) {
			return Reply{}, false
		}
	}
	if !p.end() {
		return Reply{}, false
	}
	return r, true
}

// scanner reads the plain JSON that ParseReply takes.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// byte skips white space and then c, if c is next.
func (p *scanner) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *scanner) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a string without escapes: valid UTF-8, no control
// characters.
func (p *scanner) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return string(s), utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// null reads null, if it is next.
func (p *scanner) null() bool {
	p.space()
	if bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += len("null")
		return true
	}
	return false
}

// number reads a JSON number's text.
func (p *scanner) number() (string, bool) {
	p.space()
	start := p.i
	digits := func() bool {
		n := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i > n
	}
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	first := p.i
	if !digits() || (p.b[first] == '0' && p.i-first > 1) {
		return "", false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !digits() {
			return "", false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !digits() {
			return "", false
		}
	}
	return string(p.b[start:p.i]), true
}

// member reads the value of member key into r. A null leaves the field
// as it is, as encoding/json does.
func (p *scanner) member(r *Reply, key string) bool {
	var s *string
	switch key {
	case "type":
		s = &r.Type
	case "pool":
		s = &r.Pool
	case "classifier":
		s = &r.Classifier
	case "query":
		s = &r.Query
	case "error":
		s = &r.Error
	case "code":
		s = &r.Code
	case "position":
		return p.numberInto(func(n string) error {
			v, err := strconv.ParseInt(n, 10, strconv.IntSize)
			r.Position = int(v)
			return err
		})
	case "cpu_limit":
		return p.numberInto(func(n string) (err error) {
			r.CPULimit, err = strconv.ParseFloat(n, 64)
			return err
		})
	default:
		return false
	}
	if p.null() {
		return true
	}
	v, ok := p.str()
	*s = v
	return ok
}

// numberInto reads null, which leaves the field as it is, or a number,
// which set parses into the field.
func (p *scanner) numberInto(set func(string) error) bool {
	if p.null() {
		return true
	}
	n, ok := p.number()
	return ok && set(n) == nil
}
