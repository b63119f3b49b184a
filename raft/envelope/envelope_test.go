package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

type put struct {
	Key   string
	Value int
}

type touch struct{}

const (
	typePut   Type = 1
	typeTouch Type = 2 | IgnoreUnknown
)

func jsonDef[T any](name string) Def[any] {
	return Def[any]{Name: name, Decode: func(body []byte) (any, error) {
		v := new(T)
		if err := json.Unmarshal(body, v); err != nil {
			return nil, err
		}
		return v, nil
	}}
}

var testTable = NewTable(map[Type]Def[any]{
	typePut:   jsonDef[put]("Put"),
	typeTouch: jsonDef[touch]("Touch"),
})

func encode(t *testing.T, typ Type, body any) []byte {
	t.Helper()
	b, err := Encode(typ, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecode(t *testing.T) {
	c, ok, err := testTable.Decode(encode(t, typePut, put{Key: "k", Value: 3}))
	if err != nil || !ok || !reflect.DeepEqual(c, &put{Key: "k", Value: 3}) {
		t.Fatalf("Put: %#v %v %v", c, ok, err)
	}
	// A known type with the ignorable bit set still decodes.
	if c, ok, err := testTable.Decode(encode(t, typePut|IgnoreUnknown, put{Key: "k"})); err != nil || !ok || c.(*put).Key != "k" {
		t.Fatalf("Put with the ignorable bit: %#v %v %v", c, ok, err)
	}
	// An unknown ignorable type is skipped, another is refused.
	if c, ok, err := testTable.Decode(encode(t, 0x7e|IgnoreUnknown, put{})); c != nil || ok || err != nil {
		t.Fatalf("unknown ignorable type: %#v %v %v, want nil false nil", c, ok, err)
	}
	if _, ok, err := testTable.Decode(encode(t, 0x7e, put{})); ok || !errors.Is(err, ErrUnknownType) {
		t.Fatalf("unknown type: %v %v, want ErrUnknownType", ok, err)
	}
	if _, _, err := testTable.Decode(nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty entry: %v, want ErrEmpty", err)
	}
	var syn *json.SyntaxError
	if _, ok, err := testTable.Decode([]byte{byte(typePut), '{'}); ok || !errors.As(err, &syn) {
		t.Fatalf("malformed body: %v %v, want the decoder's error", ok, err)
	}
	if n := testTable.Name(typeTouch &^ IgnoreUnknown); n != "Touch" {
		t.Fatalf("Name = %q", n)
	}
	if typ, ok := testTable.Lookup("Touch"); !ok || typ != typeTouch&^IgnoreUnknown {
		t.Fatalf("Lookup = %d %v", typ, ok)
	}
	if _, ok := testTable.Lookup(""); ok {
		t.Fatal("Lookup of the empty name found a type")
	}
}

func TestNewTableRefusesRepeats(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a type listed with and without IgnoreUnknown was accepted")
		}
	}()
	NewTable(map[Type]Def[any]{1: jsonDef[put]("A"), 1 | IgnoreUnknown: jsonDef[put]("B")})
}

// FuzzDecode: any entry decodes to a command, a skip or an error without
// panicking; the outcome follows the type byte; a decoded command encodes
// back to an entry that decodes to the same command.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("\x01{\"Key\":\"a\",\"Value\":1}"))
	f.Add([]byte("\x82{}"))
	f.Add([]byte("\xfe{\"x\":1}"))
	f.Add([]byte("\x7e{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok, err := testTable.Decode(data)
		if len(data) == 0 {
			if !errors.Is(err, ErrEmpty) {
				t.Fatalf("empty entry: %v", err)
			}
			return
		}
		typ := Type(data[0])
		known := testTable.Name(typ) != ""
		switch {
		case !known && typ&IgnoreUnknown != 0:
			if ok || err != nil || c != nil {
				t.Fatalf("unknown ignorable type %d: %#v %v %v", typ, c, ok, err)
			}
		case !known:
			if ok || !errors.Is(err, ErrUnknownType) {
				t.Fatalf("unknown type %d: %v %v", typ, ok, err)
			}
		case err != nil:
			if ok || c != nil {
				t.Fatalf("type %d: an error with a command: %#v %v", typ, c, ok)
			}
		default:
			if !ok {
				t.Fatalf("type %d: no command and no error", typ)
			}
			again, ok2, err := testTable.Decode(encode(t, typ, c))
			if err != nil || !ok2 || !reflect.DeepEqual(again, c) {
				t.Fatalf("type %d: %#v decodes again to %#v %v %v", typ, c, again, ok2, err)
			}
		}
	})
}
