package catalog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/fedgate/fedgate/raft/envelope"
)

// The type numbers are in every member's log: they never change.
func TestTypeNumbers(t *testing.T) {
	got := []CommandType{TypeCreate, TypeUpdate, TypeSetConfig, TypeDelete, TypePutUser, TypeDeleteUser, TypeJSON}
	want := []CommandType{1, 2, 3, 4, 5, 6, 0x7b}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("command type numbers %v, want %v", got, want)
	}
}

// FuzzDecodeCommand: any log entry decodes to a command, a skip or an
// error without panicking; a decoded command (of either form) encodes to
// an entry that decodes to the same command.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		{Op: "create", Bucket: &Bucket{Name: "b", Owner: "o", Home: "h"}},
		{Op: "set-config", Name: "b", Kind: "acl", Value: "<acl/>", Region: "h"},
		{Op: "put-user", User: &User{Name: "u", AccessKey: "AK", Home: "h"}},
	} {
		data, err := encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"op":"delete","name":"b","region":"h"}`)) // the form before the envelope
	f.Add([]byte(`{"op":"frobnicate"}`))
	f.Add([]byte("\xc0{}"))
	f.Add([]byte("\x40{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ch, err := decode(data)
		switch {
		case err != nil:
			if ch != nil {
				t.Fatal("an error with a change")
			}
		case ch == nil:
			if len(data) == 0 || data[0]&byte(envelope.IgnoreUnknown) == 0 || commands.Name(CommandType(data[0])) != "" {
				t.Fatalf("entry %q skipped", data)
			}
		default:
			again, err := encode(c)
			if err != nil {
				t.Fatalf("%+v does not encode: %v", c, err)
			}
			c2, ch2, err := decode(again)
			if err != nil || ch2 == nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("%+v decodes again to %+v (%v)", c, c2, err)
			}
		}
		if len(data) > 0 && data[0]&byte(envelope.IgnoreUnknown) == 0 && commands.Name(CommandType(data[0])) == "" &&
			CommandType(data[0]) != TypeJSON && !errors.Is(err, envelope.ErrUnknownType) {
			t.Fatalf("entry %q of an unknown type: %v, want ErrUnknownType", data, err)
		}
	})
}
