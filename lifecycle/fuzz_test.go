package lifecycle

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParseXML: any input is parsed or refused with an *Error, never a
// panic, and what is accepted round-trips through XML unchanged.
func FuzzParseXML(f *testing.F) {
	f.Add([]byte(wrap(`<Rule><ID>a</ID><Filter><Prefix>p/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseXML(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		out, err := c.XML("")
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseXML(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v", c, back)
		}
	})
}
