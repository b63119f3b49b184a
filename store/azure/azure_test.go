package azure

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Stop()
	os.Exit(code)
}

var testLoc = policies.Location{Cloud: "azure", Region: "test1"}

// testConfig is the config of a store on a fresh Azurite container.
func testConfig(t *testing.T, adjust func(*Config)) Config {
	t.Helper()
	az := testenv.Azurite(t)
	cfg := Config{
		Name: "azure-test", Location: testLoc, Container: az.NewContainer(t),
		ConnectionString: az.ConnectionString,
		BlockSize:        256 << 10, // small blocks, so the suite's objects take the staged path
	}
	if adjust != nil {
		adjust(&cfg)
	}
	return cfg
}

// newStore makes a store on a fresh Azurite container.
func newStore(t *testing.T, adjust func(*Config)) *Store {
	t.Helper()
	return newStoreFrom(t, testConfig(t, adjust))
}

func newStoreFrom(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, nil) },
		storetest.Capabilities{SkipKey: SkipKey})
}

// TestConformanceAccountKey runs the suite's basics through the
// Endpoint/Account/AccountKey configuration and the default block size.
func TestConformanceAccountKey(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	az := testenv.Azurite(t)
	s, err := New(t.Context(), Config{Name: "k", Location: testLoc, Account: az.Account, AccountKey: az.AccountKey,
		Endpoint: az.Endpoint, Container: az.NewContainer(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	info, err := s.Put(t.Context(), "k/obj", bytes.NewReader(b), int64(len(b)), store.PutOptions{})
	if err != nil || info.ETag == "" || info.Size != int64(len(b)) {
		t.Fatalf("Put: %+v, %v", info, err)
	}
	if st, err := s.Stat(t.Context(), "k/obj"); err != nil || st.ETag != info.ETag || st.Validator != info.Validator {
		t.Fatalf("Stat = %+v, %v; Put said %+v", st, err, info)
	}
}

func TestMetadataNames(t *testing.T) {
	for _, name := range []string{"run-id", "under_score", "dotted.name", "a1.b_2-c", "UPPER", "é", "_", "9lives", "x_2d"} {
		enc := encodeName(name)
		for i := 0; i < len(enc); i++ {
			c := enc[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
				t.Errorf("encodeName(%q) = %q: byte %q is not [a-z0-9_]", name, enc, c)
			}
		}
		// Azure (or Go's header canonicalization) may change the case.
		for _, got := range []string{enc, strings.ToUpper(enc), strings.ToUpper(enc[:1]) + enc[1:]} {
			if dec, ok := decodeName(got); !ok || dec != name {
				t.Errorf("decodeName(%q) = %q, %v; want %q", got, dec, ok, name)
			}
		}
	}
	if got := userPlain + encodeName("run-id"); got != "u_run_2did" {
		t.Errorf("run-id encodes to %q, want u_run_2did", got)
	}
	for _, bad := range []string{"_", "_2", "_zz", "a_4"} {
		if _, ok := decodeName(bad); ok {
			t.Errorf("decodeName(%q) accepted a name encodeName never writes", bad)
		}
	}
}

func TestMetadataValues(t *testing.T) {
	m := store.Metadata{
		ContentType: "text/plain", Expires: "Thu, 01 Dec 2094 16:00:00 GMT",
		User:      map[string]string{"plain": "v=1;w=2", "spaces": " padded ", "utf8": "日本", "empty": "", "nl": "a\nb"},
		Checksums: map[string]string{"SHA256": "abc=", "CRC64NVME": "xyz="},
	}
	md, h := encodeMeta(m, "etag-1", nil)
	for k, v := range md {
		if !headerSafe(*v) {
			t.Errorf("metadata %s = %q is not header-safe", k, *v)
		}
	}
	// Keys come back canonicalized by Go's HTTP stack.
	back := map[string]*string{}
	for k, v := range md {
		back[strings.ToUpper(k[:1])+k[1:]] = v
	}
	got, reserved := decodeMeta(props{contentType: h.BlobContentType, metadata: back})
	if reserved[metaETag] != "etag-1" || got.ContentType != "text/plain" || got.Expires != m.Expires {
		t.Errorf("decoded %+v, reserved %v", got, reserved)
	}
	for k, v := range m.User {
		if got.User[k] != v {
			t.Errorf("user %q = %q, want %q", k, got.User[k], v)
		}
	}
	for k, v := range m.Checksums {
		if got.Checksums[k] != v {
			t.Errorf("checksum %s = %q, want %q", k, got.Checksums[k], v)
		}
	}
}

func TestBlockIDs(t *testing.T) {
	ids := map[string]bool{}
	for _, b := range []blockID{
		{kind: kindPut, id: randomID(), index: 7},
		{kind: kindPartBlock, id: randomID(), part: 10000, attempt: newAttempt(time.Now()), index: 1<<32 - 1},
		{kind: kindPartFinal, id: randomID(), part: 1, attempt: 1, md5: [16]byte{1, 2, 3}},
		{kind: kindEmptyPart, id: randomID(), part: 2},
	} {
		s := b.String()
		if len(s) != 64 || ids[s] {
			t.Errorf("block ID %q: length %d (want 64) or repeated", s, len(s))
		}
		ids[s] = true
		if got, ok := parseBlockID(s); !ok || got != b {
			t.Errorf("parseBlockID(%v.String()) = %v, %v", b, got, ok)
		}
	}
	if _, ok := parseBlockID("AAAA"); ok {
		t.Error("parseBlockID accepted a foreign ID")
	}
}

func TestKeys(t *testing.T) {
	for _, k := range []string{"a", "a/b", "dir/", "a//b", "/", "a.b", ".hidden", "é/日本語", strings.Repeat("a/", 253) + "b"} {
		if err := checkKey("t", k); err != nil {
			t.Errorf("checkKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", ".", "..", "a/./b", "a/..", "x.", "tab\t", "del\x7f", `back\slash`,
		".fedgate/uploads/x", strings.Repeat("a/", 254) + "b", strings.Repeat("k", 1025)} {
		if err := checkKey("t", k); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("checkKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

// TestSecretsNotInErrors: a request that fails (nothing listens on the
// endpoint, then a wrong key) never shows a secret in its error.
func TestSecretsNotInErrors(t *testing.T) {
	const key = "c2VjcmV0LWtleS1kby1ub3QtbG9nLW1lLXBsZWFzZS0xMjM0NTY3ODkwMTIzNDU2Nzg5MA=="
	const sas = "sv=2024-11-04&ss=b&srt=co&sp=rwdl&se=2099-01-01T00:00:00Z&sig=TOPSECRETsignature%2Bvalue%3D"
	ctx, cancel := context.WithTimeout(t.Context(), 30e9)
	defer cancel()
	for _, cfg := range []Config{
		{Account: "acct", AccountKey: key, Endpoint: "http://127.0.0.1:1/acct", Container: "c", MaxRetries: -1},
		{Account: "acct", SASToken: "?" + sas, Endpoint: "http://127.0.0.1:1/acct", Container: "c", MaxRetries: -1},
		{ConnectionString: "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" + key +
			";BlobEndpoint=http://127.0.0.1:1/acct;", Container: "c", MaxRetries: -1},
	} {
		s, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(ctx, "k", strings.NewReader("x"), 1, store.PutOptions{})
		checkNoSecret(t, err, key, "TOPSECRET")
		_, err = s.ReadRange(ctx, "k", 0, -1, "")
		checkNoSecret(t, err, key, "TOPSECRET")
	}
	// Against Azurite: a wrong key is refused (403) without showing it.
	az := testenv.Azurite(t)
	s, err := New(ctx, Config{Account: az.Account, AccountKey: key, Endpoint: az.Endpoint, Container: az.NewContainer(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(ctx, "k")
	checkNoSecret(t, err, key)
	if !errors.Is(err, store.ErrAccessDenied) {
		t.Errorf("Stat with a wrong key: %v, want ErrAccessDenied", err)
	}
}

func checkNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("request succeeded, want an error")
	}
	t.Log(err)
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) || strings.Contains(err.Error(), strings.ReplaceAll(s, "=", "%3D")) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}
