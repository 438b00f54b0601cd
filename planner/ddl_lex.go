package planner

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokenKind classifies a token of the pool language.
type tokenKind uint8

const (
	tokEOF    tokenKind = iota
	tokIdent            // bare word: a keyword or a name (olap, CREATE, RESOURCES_WEIGHT)
	tokString           // 'single' or "double" quoted literal
	tokQuoted           // `back` quoted identifier
	tokNumber           // -?digits[.digits]
	tokLParen
	tokRParen
	tokComma
	tokEq
	tokSemi
	tokInvalid // a lexical error, already reported; the parser fails the statement silently
)

// String names the kind for error messages.
func (k tokenKind) String() string {
	switch k {
	case tokEOF:
		return "end of file"
	case tokIdent:
		return "word"
	case tokString:
		return "string"
	case tokQuoted:
		return "`quoted` name"
	case tokNumber:
		return "number"
	case tokLParen:
		return "'('"
	case tokRParen:
		return "')'"
	case tokComma:
		return "','"
	case tokEq:
		return "'='"
	case tokSemi:
		return "';'"
	case tokInvalid:
		return "invalid text"
	}
	return fmt.Sprintf("token(%d)", uint8(k))
}

// token is one lexical unit. text is the unquoted value for strings and
// quoted names, the source spelling otherwise.
type token struct {
	kind tokenKind
	text string
	pos  Pos
}

// describe renders the token for "expected X, found Y" messages.
func (t token) describe() string {
	switch t.kind {
	case tokIdent, tokNumber:
		return fmt.Sprintf("%q", t.text)
	case tokString:
		return fmt.Sprintf("string %q", t.text)
	case tokQuoted:
		return fmt.Sprintf("`%s`", t.text)
	}
	return t.kind.String()
}

// is reports whether t is the keyword kw (case-insensitive).
func (t token) is(kw string) bool {
	return t.kind == tokIdent && strings.EqualFold(t.text, kw)
}

// lexer turns pool-language source into tokens. Keywords are not told
// apart from names here; the parser decides by position.
type lexer struct {
	file string
	src  string
	off  int // byte offset of the next rune
	line int
	col  int
	errs ErrorList
}

// lex returns the tokens of src, ending with tokEOF, and every lexical
// error found. An error becomes a tokInvalid token and the scan resumes at
// the next character, so one stray character does not hide later
// problems; an unterminated string or comment ends the scan.
func lex(file string, src []byte) ([]token, ErrorList) {
	lx := &lexer{file: file, src: string(src), line: 1, col: 1}
	var toks []token
	for {
		t := lx.next()
		toks = append(toks, t)
		if t.kind == tokEOF {
			return toks, lx.errs
		}
	}
}

func (lx *lexer) pos() Pos { return Pos{File: lx.file, Line: lx.line, Col: lx.col} }

// peek returns the rune at the read position without consuming it; 0 at
// the end of input.
func (lx *lexer) peek() rune { return lx.peekAt(0) }

// peekAt returns the rune n bytes past the read position (n is only used
// for ASCII look-ahead).
func (lx *lexer) peekAt(n int) rune {
	if lx.off+n >= len(lx.src) {
		return 0
	}
	r, _ := utf8.DecodeRuneInString(lx.src[lx.off+n:])
	return r
}

// advance consumes one rune and keeps line and column.
func (lx *lexer) advance() rune {
	r, size := utf8.DecodeRuneInString(lx.src[lx.off:])
	lx.off += size
	if r == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	return r
}

func (lx *lexer) atEnd() bool { return lx.off >= len(lx.src) }

// next scans one token.
// punctuation is the token kind of each one-character token.
var punctuation = map[rune]tokenKind{'(': tokLParen, ')': tokRParen, ',': tokComma, '=': tokEq, ';': tokSemi}

func (lx *lexer) next() token {
	lx.skipSpaceAndComments()
	start := lx.pos()
	if lx.atEnd() {
		return token{kind: tokEOF, pos: start}
	}
	r := lx.peek()
	if kind, ok := punctuation[r]; ok {
		lx.advance()
		return token{kind: kind, text: string(r), pos: start}
	}
	switch {
	case r == '\'' || r == '"':
		return lx.quoted(tokString, start)
	case r == '`':
		return lx.quoted(tokQuoted, start)
	case isDigit(r) || (r == '-' && isDigit(lx.peekAt(1))):
		return lx.number(start)
	case isIdentStart(r) || isPathChar(r):
		// A word, or a name or path written without its quotes
		// (my-pool, .metadata/workload_manager/pools/olap): the whole
		// run is one token, so it gets one error, not one per '/'.
		b := lx.off
		special := false
		for r := lx.peek(); isIdentPart(r) || isPathChar(r); r = lx.peek() {
			if (r == '-' && lx.peekAt(1) == '-') || (r == '/' && lx.peekAt(1) == '*') {
				break // a comment starts
			}
			special = special || isPathChar(r)
			lx.advance()
		}
		text := lx.src[b:lx.off]
		if special {
			lx.errs.errorf(start, "%q must be quoted: `…` or '…' around names and paths with '.', '/', '-', '%%' or '@' (`.metadata/workload_manager/pools/olap`, 'all-users@well-known')", text)
			return token{kind: tokInvalid, pos: start}
		}
		return token{kind: tokIdent, text: text, pos: start}
	}
	lx.advance()
	if r == utf8.RuneError {
		lx.errs.errorf(start, "invalid UTF-8 byte")
	} else {
		lx.errs.errorf(start, "unexpected character %q", r)
	}
	return token{kind: tokInvalid, pos: start}
}

// skipSpaceAndComments skips whitespace, -- line comments and /* block
// comments */ (not nested). An unterminated block comment is an error and
// ends the input.
func (lx *lexer) skipSpaceAndComments() {
	for !lx.atEnd() {
		r := lx.peek()
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v':
			lx.advance()
		case r == '-' && lx.peekAt(1) == '-':
			for !lx.atEnd() && lx.peek() != '\n' {
				lx.advance()
			}
		case r == '/' && lx.peekAt(1) == '*':
			start := lx.pos()
			lx.advance()
			lx.advance()
			for {
				if lx.atEnd() {
					lx.errs.errorf(start, "comment /* is not closed with */")
					return
				}
				if lx.peek() == '*' && lx.peekAt(1) == '/' {
					lx.advance()
					lx.advance()
					break
				}
				lx.advance()
			}
		default:
			return
		}
	}
}

// quoted scans a '…', "…" or `…` token. Inside, the quote character is
// escaped by doubling it or with a backslash, and \\ is one backslash;
// every other character, newlines included, is taken as written.
func (lx *lexer) quoted(kind tokenKind, start Pos) token {
	q := lx.advance()
	var b strings.Builder
	for {
		if lx.atEnd() {
			what := "string"
			if kind == tokQuoted {
				what = "name"
			}
			lx.errs.errorf(start, "%s opened with %c here is not closed", what, q)
			return token{kind: tokInvalid, pos: start}
		}
		r := lx.advance()
		switch {
		case r == '\\' && (lx.peek() == q || lx.peek() == '\\'):
			b.WriteRune(lx.advance())
		case r == q && lx.peek() == q:
			lx.advance()
			b.WriteRune(q)
		case r == q:
			return token{kind: kind, text: b.String(), pos: start}
		default:
			b.WriteRune(r)
		}
	}
}

// number scans -?digits[.digits]. A letter or a second dot right after it
// is an error ("10abc", "1.2.3").
func (lx *lexer) number(start Pos) token {
	b := lx.off
	if lx.peek() == '-' {
		lx.advance()
	}
	for isDigit(lx.peek()) {
		lx.advance()
	}
	if lx.peek() == '.' && isDigit(lx.peekAt(1)) {
		lx.advance()
		for isDigit(lx.peek()) {
			lx.advance()
		}
	}
	if r := lx.peek(); isIdentPart(r) || r == '.' {
		for isIdentPart(lx.peek()) || lx.peek() == '.' {
			lx.advance()
		}
		lx.errs.errorf(start, "malformed number %q; accepted: an integer or a decimal such as -1, 70, 12.5", lx.src[b:lx.off])
		return token{kind: tokInvalid, pos: start}
	}
	return token{kind: tokNumber, text: lx.src[b:lx.off], pos: start}
}

func isDigit(r rune) bool      { return r >= '0' && r <= '9' }
func isIdentStart(r rune) bool { return r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }
func isIdentPart(r rune) bool  { return isIdentStart(r) || isDigit(r) }

// isPathChar reports characters of unquoted names and paths that the
// language does not allow outside quotes.
func isPathChar(r rune) bool { return r == '.' || r == '/' || r == '-' || r == '%' || r == '@' }
