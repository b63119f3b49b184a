package storetest

import (
	"bytes"
	"io"
	"testing"

	"github.com/fedgate/fedgate/store"
)

// testReadFirst checks store.FirstReader, where the store has it: the
// info is Stat's (size, ETag, validator, metadata), the reader holds the
// first min(n, size) bytes, for an object shorter than n, longer than n,
// an empty one, and a missing key.
func testReadFirst(t *testing.T, s store.Store, caps Capabilities) {
	fr, ok := s.(store.FirstReader)
	if !ok {
		t.Skip("the store has no store.FirstReader")
	}
	readFirst := func(key string, n int64) (store.ObjectInfo, []byte) {
		t.Helper()
		info, rc, err := fr.ReadFirst(t.Context(), key, n)
		if err != nil {
			t.Fatalf("ReadFirst(%q, %d): %v", key, n, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("ReadFirst(%q, %d): reading: %v", key, n, err)
		}
		return info, b
	}
	small, large := data(40, 5000), data(41, 300_000)
	md := fullMetadata(small)
	put(t, s, "small", small, store.PutOptions{Metadata: md})
	put(t, s, "large", large, store.PutOptions{})
	put(t, s, "empty", nil, store.PutOptions{})
	for _, c := range []struct {
		key  string
		n    int64
		want []byte
	}{{"small", 65536, small}, {"small", 5000, small}, {"large", 65536, large[:65536]}, {"empty", 4096, nil}} {
		info, b := readFirst(c.key, c.n)
		st := stat(t, s, c.key)
		if info.Key != c.key || info.Size != st.Size || info.ETag != st.ETag || info.Validator != st.Validator || info.VersionID != st.VersionID {
			t.Errorf("ReadFirst(%q, %d) = key %q size %d ETag %q validator %q version %q; Stat says %q %d %q %q %q",
				c.key, c.n, info.Key, info.Size, info.ETag, info.Validator, info.VersionID, st.Key, st.Size, st.ETag, st.Validator, st.VersionID)
		}
		checkMetadata(t, "ReadFirst("+c.key+")", info.Metadata, st.Metadata)
		if !bytes.Equal(b, c.want) {
			t.Errorf("ReadFirst(%q, %d): %d bytes (md5 %s), want %d (md5 %s)", c.key, c.n, len(b), md5hex(b), len(c.want), md5hex(c.want))
		}
	}
	if _, rc, err := fr.ReadFirst(t.Context(), "missing", 100); err == nil {
		rc.Close()
		t.Error("ReadFirst of a missing key: no error")
	} else {
		wantErr(t, "ReadFirst(missing)", err, store.ErrNotFound)
	}
}
