package flagfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type vals struct {
	listen, secret string
	join           []string
	n              int
	u              uint64
	b              bool
	d              time.Duration
}

func newSet(v *vals) *pflag.FlagSet {
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fs.StringVar(&v.listen, "listen", "127.0.0.1:9000", "")
	fs.StringVar(&v.secret, "secret-key", "", "")
	fs.StringSliceVar(&v.join, "join", nil, "")
	fs.IntVar(&v.n, "fill-concurrency", 8, "")
	fs.Uint64Var(&v.u, "raft-trailing-logs", 10240, "")
	fs.BoolVar(&v.b, "bootstrap", false, "")
	fs.DurationVar(&v.d, "staging-wait", 30*time.Second, "")
	fs.String("server-config", "", "")
	return fs
}

var opts = Options{Exclude: []string{"server-config", "help"}}

func TestParseSetsEveryType(t *testing.T) {
	var v vals
	fs := newSet(&v)
	doc := `# comment
listen: 10.0.0.1:9000
join: [10.0.0.2:9000, "10.0.0.3:9000"]
fill-concurrency: 16
raft-trailing-logs: 20000
bootstrap: true
staging-wait: 1m30s
`
	res, err := Parse("s.yaml", []byte(doc), fs, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := vals{listen: "10.0.0.1:9000", join: []string{"10.0.0.2:9000", "10.0.0.3:9000"}, n: 16, u: 20000, b: true, d: 90 * time.Second}
	if v.listen != want.listen || !slices.Equal(v.join, want.join) || v.n != want.n || v.u != want.u || v.b != want.b || v.d != want.d {
		t.Errorf("got %+v, want %+v", v, want)
	}
	if !slices.Equal(res.Set, []string{"listen", "join", "fill-concurrency", "raft-trailing-logs", "bootstrap", "staging-wait"}) {
		t.Errorf("Set = %v", res.Set)
	}
	if !fs.Changed("listen") {
		t.Error("a key set from the file is not marked changed")
	}
}

func TestCommandLineWins(t *testing.T) {
	var v vals
	fs := newSet(&v)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9100", "--join", "a:1"}); err != nil {
		t.Fatal(err)
	}
	res, err := Parse("s.yaml", []byte("listen: 10.0.0.1:9000\njoin: [b:1, c:1]\nfill-concurrency: 4\n"), fs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if v.listen != "127.0.0.1:9100" || !slices.Equal(v.join, []string{"a:1"}) || v.n != 4 {
		t.Errorf("got %+v", v)
	}
	if !slices.Equal(res.Overridden, []string{"listen", "join"}) {
		t.Errorf("Overridden = %v", res.Overridden)
	}
}

func TestJoinAsOneString(t *testing.T) {
	var v vals
	if _, err := Parse("s.yaml", []byte("join: a:1, b:2\n"), newSet(&v), opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.join, []string{"a:1", "b:2"}) {
		t.Errorf("join = %q", v.join)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown key did you mean", "listen: a:1\nbootstrp: true\n",
			[]string{`s.yaml:2:1: bootstrp: unknown key "bootstrp" (did you mean "bootstrap"?)`}},
		{"unknown key far", "colour: blue\n",
			[]string{`s.yaml:1:1: colour: unknown key "colour": keys are the long flag names of the command`}},
		{"dashes", "--listen: a:1\n",
			[]string{`s.yaml:1:1: --listen: unknown key "--listen": write the flag name without dashes (listen)`}},
		{"int as string", "fill-concurrency: many\n",
			[]string{`s.yaml:1:19: fill-concurrency: want a whole number, got the string "many"`}},
		{"negative uint", "raft-trailing-logs: -1\n",
			[]string{`s.yaml:1:21: raft-trailing-logs: "-1": invalid syntax (want a whole number ≥ 0)`}},
		{"bool as string", "bootstrap: \"yes\"\n",
			[]string{`s.yaml:1:12: bootstrap: want true or false, got the string "yes"`}},
		{"duration as number", "staging-wait: 30\n",
			[]string{`s.yaml:1:15: staging-wait: want a duration like 30s, 5m or 1h30m, got the number 30`}},
		{"bad duration", "staging-wait: 30 seconds\n",
			[]string{`s.yaml:1:15: staging-wait: want a duration like 30s, 5m or 1h30m, got "30 seconds"`}},
		{"list for string", "listen: [a, b]\n",
			[]string{`s.yaml:1:9: listen: want a string, got a list`}},
		{"mapping in list", "join:\n  - a: 1\n",
			[]string{`s.yaml:2:5: join: want a list of strings ([a, b]) or one comma-separated string, got a list holding a mapping`}},
		{"null", "listen:\n",
			[]string{`s.yaml:1:1: listen: no value; want a string (remove the key to keep the default)`}},
		{"duplicate", "listen: a:1\nlisten: b:1\n",
			[]string{`s.yaml:2:1: invalid YAML: mapping key "listen" already defined`}},
		{"excluded", "server-config: other.yaml\n",
			[]string{`s.yaml:1:1: server-config: cannot be set in this file (give it on the command line)`}},
		{"not a mapping", "- listen\n",
			[]string{`s.yaml:1:1: want a mapping of flag names to values (listen: 127.0.0.1:9000), got a list`}},
		{"tab", "listen: a\n\tjoin: b\n", []string{"(indent with spaces, not tabs)"}},
		{"several", "lisen: a\nbootstrap: 1\n",
			[]string{`s.yaml:1:1: lisen: unknown key "lisen" (did you mean "listen"?)`, `s.yaml:2:12: bootstrap: want true or false, got the number 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v vals
			fs := newSet(&v)
			_, err := Parse("s.yaml", []byte(tc.doc), fs, opts)
			var l ErrorList
			if !errors.As(err, &l) {
				t.Fatalf("err = %v, want an ErrorList", err)
			}
			if len(l) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(l), len(tc.want), err)
			}
			for i, w := range tc.want {
				if got := l[i].Error(); !strings.Contains(got, w) {
					t.Errorf("error %d = %q, want %q", i, got, w)
				}
			}
			if v.listen != "127.0.0.1:9000" || fs.Changed("listen") {
				t.Error("an invalid file set a flag")
			}
		})
	}
}

func TestLoadEmptyAndMissing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(p, []byte("# nothing yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var v vals
	if res, err := Load(p, newSet(&v), opts); err != nil || len(res.Set) != 0 {
		t.Errorf("empty file: %v, %v", res, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), newSet(&v), opts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
