package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a place in a pool file. Line and Col count from 1; Col counts
// characters (a tab is one column). The zero Pos means "built in", for
// example the `default` pool that no file created.
type Pos struct {
	File string
	Line int
	Col  int
}

// String returns "file:line:col", "line:col" without a file name, or
// "built in" for the zero Pos.
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return "built in"
	case p.File == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Error is one problem in a pool file: where it is and what is wrong.
type Error struct {
	Pos Pos
	Msg string
}

// Error returns "file:line:col: message".
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList is every problem found in one Parse or Apply, in file order. A
// file with any of them is refused as a whole.
type ErrorList []*Error

// Error returns the problems one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As access to each problem.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// errorf adds a problem at pos.
func (l *ErrorList) errorf(pos Pos, format string, args ...any) {
	*l = append(*l, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// Warning is something accepted that the operator should know about, for
// example a classifier whose pool does not exist (it is skipped at run
// time, as YDB does).
type Warning struct {
	Pos Pos
	Msg string
}

// String returns "file:line:col: warning: message".
func (w Warning) String() string { return w.Pos.String() + ": warning: " + w.Msg }

// sortErrors orders problems by line and column; lexical and syntax
// errors are found in two passes.
func sortErrors(l ErrorList) {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
}
