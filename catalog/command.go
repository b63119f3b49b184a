package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/fedgate/fedgate/raft/envelope"
)

// CommandType is the first byte of a catalog log entry (raft/envelope).
// Types are only ever appended: a number, once released, keeps its
// meaning. A new type that a member which does not know it may skip
// without answering differently from the others (a hint, a record no
// lookup depends on) is marked envelope.IgnoreUnknown, so that a rolling
// upgrade can write it while older members still apply the log.
type CommandType = envelope.Type

// Command types, numbered from 1 in this order: add new ones at the end
// only (the numbers are in every member's log; TestTypeNumbers pins them).
const (
	TypeCreate CommandType = iota + 1
	TypeUpdate
	TypeSetConfig
	TypeDelete
	TypePutUser
	TypeDeleteUser
	// TypeJSON (the byte '{', 0x7b) is not a type a member writes: entries
	// written before the envelope are a Command as JSON, its Op naming the
	// change, and they start with it. It stays reserved.
	TypeJSON CommandType = '{'
)

// change is a command's effect on the State, run under its lock.
type change func(*State, Command) error

// op is a command as the table decodes it.
type op struct {
	c      Command
	change change
}

func def(name string, f change) envelope.Def[op] {
	return envelope.Def[op]{Name: name, Decode: func(body []byte) (op, error) {
		var c Command
		if err := json.Unmarshal(body, &c); err != nil {
			return op{}, fmt.Errorf("%s: %w", name, err)
		}
		c.Op = name
		return op{c: c, change: f}, nil
	}}
}

// commands lists every command type the catalog applies; the names are
// Command.Op's.
var commands = envelope.NewTable(map[CommandType]envelope.Def[op]{
	TypeCreate:     def("create", (*State).create),
	TypeUpdate:     def("update", (*State).update),
	TypeSetConfig:  def("set-config", (*State).setConfig),
	TypeDelete:     def("delete", (*State).delete),
	TypePutUser:    def("put-user", (*State).putUser),
	TypeDeleteUser: def("delete-user", (*State).deleteUser),
})

// encode is the log entry of c: the type its Op names, then c as JSON.
func encode(c Command) ([]byte, error) {
	t, ok := commands.Lookup(c.Op)
	if !ok {
		return nil, fmt.Errorf("catalog: unknown command %q", c.Op)
	}
	c.Op = ""
	return envelope.Encode(t, c)
}

// decode parses a log entry: the command and its change; a nil change
// and no error for an unknown type marked envelope.IgnoreUnknown (skip
// it); an error for an unknown type without it or a malformed entry.
// An entry of the old form (TypeJSON) is read by its Op.
func decode(data []byte) (Command, change, error) {
	if len(data) > 0 && CommandType(data[0]) == TypeJSON {
		var c Command
		if err := json.Unmarshal(data, &c); err != nil {
			return Command{}, nil, err
		}
		t, ok := commands.Lookup(c.Op)
		if !ok {
			return Command{}, nil, fmt.Errorf("%w %q", envelope.ErrUnknownType, c.Op)
		}
		data = append([]byte{byte(t)}, data...)
	}
	o, _, err := commands.Decode(data)
	return o.c, o.change, err
}
