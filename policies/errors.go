package policies

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	suggestpkg "github.com/fedgate/fedgate/internal/suggest"
)

// Error is one problem in a policy file. Line and Column are 1-based and
// point at the offending node (the key for an unknown, duplicate or
// unsupported key; the value for a bad value; the enclosing mapping for a
// missing key). A whole-file error (unreadable file, parser failure without
// a position) has Line and Column 0.
type Error struct {
	File   string // the file name given to Parse or Load
	Line   int    // 1-based; 0 for a whole-file error
	Column int    // 1-based; 0 for a whole-file error
	Path   string // where in the document, e.g. "buckets[2].placement.erasure.data"; "" for the document itself
	Msg    string // what is wrong and what was expected
}

// Error formats the error as "file:line:column: path: msg".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one policy file, sorted by position
// (whole-file errors first). Parse returns a non-empty ErrorList or nil.
type ErrorList []*Error

// Error prints one error per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sortErrors orders errors by position and drops exact duplicates.
func sortErrors(l ErrorList) ErrorList {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
	return slices.CompactFunc(l, func(a, b *Error) bool { return *a == *b })
}

// Errors returned by (*Policy).Region; test with errors.Is.
var (
	ErrNoRegions      = errors.New("policies: the policy declares no regions")
	ErrRegionRequired = errors.New("policies: the policy declares several regions; name one")
	ErrUnknownRegion  = errors.New("policies: unknown region")
)

func suggest(s string, candidates []string) string { return suggestpkg.Closest(s, candidates) }

// expected formats the end of an error message about a name: a
// did-you-mean suggestion when got is close to one of the choices,
// otherwise the list of choices.
func expected(got string, choices []string) string {
	if s := suggest(got, choices); s != "" {
		return fmt.Sprintf("(did you mean %q?)", s)
	}
	return oneOf(choices)
}

// oneOf lists the choices, for a value that must be one of a few words.
func oneOf(choices []string) string {
	if len(choices) == 0 {
		return "(none are declared)"
	}
	return "(expected one of " + strings.Join(choices, ", ") + ")"
}
