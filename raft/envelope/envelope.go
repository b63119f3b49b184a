// Package envelope is the encoding of the commands fedgate's Raft groups
// write to their logs: one type byte, then the command's JSON body. Types
// are only ever appended: a number, once released, keeps its meaning, and
// a body only gains fields. The IgnoreUnknown bit of a type lets a member
// that does not know the type (an older build, during a rolling upgrade)
// skip the entry; without it such a member rejects the entry with
// ErrUnknownType (the entry is consumed and changes nothing). Each group
// lists its types in a Table.
package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Type is the first byte of a log entry.
type Type uint8

// IgnoreUnknown, set in a Type, lets a member that does not know the type
// skip the entry.
const IgnoreUnknown Type = 0x80

var (
	// ErrEmpty: a log entry with no type byte.
	ErrEmpty = errors.New("raft: empty log entry")
	// ErrUnknownType: a type the table does not list, without IgnoreUnknown.
	ErrUnknownType = errors.New("raft: unknown command type")
)

// Encode returns the log entry of a command of type t: t, then body as JSON.
func Encode(t Type, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("raft: encode %T: %w", body, err)
	}
	return append([]byte{byte(t)}, b...), nil
}

// Def is one row of a Table: the command's name and the decoder of its
// body (the entry without the type byte).
type Def[C any] struct {
	Name   string
	Decode func(body []byte) (C, error)
}

// Table lists a group's command types. The zero Table lists none.
type Table[C any] struct {
	defs [IgnoreUnknown]Def[C] // by type without the IgnoreUnknown bit
}

// NewTable is a table of defs. It panics on a row without a name or a
// decoder, and on two rows for one type (with or without IgnoreUnknown):
// a table is a program's constant.
func NewTable[C any](defs map[Type]Def[C]) *Table[C] {
	t := &Table[C]{}
	for typ, d := range defs {
		i := typ &^ IgnoreUnknown
		if d.Name == "" || d.Decode == nil || t.defs[i].Decode != nil {
			panic(fmt.Sprintf("envelope: bad or repeated row for type %d", typ))
		}
		t.defs[i] = d
	}
	return t
}

// Name is the name of type typ ("" when the table does not list it).
func (t *Table[C]) Name(typ Type) string { return t.defs[typ&^IgnoreUnknown].Name }

// Lookup is the type named name.
func (t *Table[C]) Lookup(name string) (Type, bool) {
	for i, d := range t.defs {
		if d.Name == name && name != "" {
			return Type(i), true
		}
	}
	return 0, false
}

// Decode parses a log entry. It returns the command and true for a type
// the table lists (with or without IgnoreUnknown set), the zero C and
// false (and no error) for an unknown type marked IgnoreUnknown, an error
// wrapping ErrUnknownType for another unknown type, ErrEmpty for an empty
// entry, and the decoder's error for a malformed body.
func (t *Table[C]) Decode(data []byte) (C, bool, error) {
	var zero C
	if len(data) == 0 {
		return zero, false, ErrEmpty
	}
	typ := Type(data[0])
	d := t.defs[typ&^IgnoreUnknown]
	if d.Decode == nil {
		if typ&IgnoreUnknown != 0 {
			return zero, false, nil
		}
		return zero, false, fmt.Errorf("%w: %d", ErrUnknownType, typ)
	}
	c, err := d.Decode(data[1:])
	if err != nil {
		return zero, false, err
	}
	return c, true, nil
}
