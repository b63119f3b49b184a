package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fedgate/fedgate/adminapi"
	"github.com/fedgate/fedgate/internal/testenv"
	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// screenshotsEnv names a directory: when set, TestConsoleInChromium saves
// its screenshots there (docs/images/ holds the ones docs/console.md shows).
const screenshotsEnv = "FEDGATE_CONSOLE_SCREENSHOTS"

// TestConsoleInChromium: a 3-node region of real processes with a bucket
// erasure-coded 2+1 over three posix stores; one store's directory is
// wiped and the objects are read back (by reconstruction). Headless
// Chromium signs in to the console with the root keys and the page shows
// the three members, the bucket with its placement, and the bucket and
// its objects as degraded.
func TestConsoleInChromium(t *testing.T) {
	browser := testenv.Chromium(t)

	base := t.TempDir()
	dirs := map[string]string{}
	for _, name := range []string{"nas", "a", "b", "c"} {
		dirs[name] = filepath.Join(base, name)
		mustOK(t, os.MkdirAll(dirs[name], 0o755))
	}
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n"
	for _, name := range []string{"nas", "a", "b", "c"} {
		policy += fmt.Sprintf("  - {name: %s, kind: posix, location: onprem:lga1, path: %s}\n", name, dirs[name])
	}
	policy += "buckets:\n  - name: ckpt\n    placement:\n      erasure: {data: 2, parity: 1, stores: [a, b, c]}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))

	addrs := freeAddrs(t, 9)
	httpAddrs, raftAddrs, internalAddrs := addrs[:3], addrs[3:6], addrs[6:]
	nodes := make([]*server, 3)
	for i := range 3 {
		var join []string
		for j := range 3 {
			if j != i {
				join = append(join, httpAddrs[j])
			}
		}
		p := testserver.Spawn(t, binary, t.TempDir(), "--node-id", fmt.Sprintf("n%d", i+1), "--listen", httpAddrs[i],
			"--raft-addr", raftAddrs[i], "--internal-addr", internalAddrs[i], "--bootstrap-expect", "3",
			"--join", strings.Join(join, ","), "--config", pf, "--region", "lab")
		nodes[i] = &server{Process: p, t: t}
	}
	for _, n := range nodes {
		n.WaitReady(t)
	}
	var st adminapi.Cluster
	wait.For(t, 20*time.Second, "3 healthy members and a leader", func() bool {
		var err error
		st, err = clusterStatus(nodes[0])
		return err == nil && settled(st, 3)
	})

	objects := map[string][]byte{
		"model/step-100.pt": randBytes(t, 3<<20+5),
		"model/step-200.pt": randBytes(t, 1<<20),
		"notes.txt":         []byte("a small object"),
	}
	s := nodes[0]
	for k, v := range objects {
		put(t, s.root(), "ckpt", k, v)
	}
	// Wipe store a behind fedgate's back, then read everything back: the
	// reads are served from b and c.
	entries, err := os.ReadDir(dirs["a"])
	mustOK(t, err)
	if len(entries) == 0 {
		t.Fatal("store a holds nothing after the writes: the erasure layout did not use it")
	}
	for _, e := range entries {
		mustOK(t, os.RemoveAll(filepath.Join(dirs["a"], e.Name())))
	}
	for k, v := range objects {
		if got, _ := getBytes(t, s.root(), "ckpt", k); !bytes.Equal(got, v) {
			t.Fatalf("%s with store a wiped: %d bytes, differs", k, len(got))
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.WindowSize(1400, 1700),
		chromedp.DisableGPU,
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	// The first Run starts the browser, which lives as long as that call's
	// context: no timeout on it; the steps after it get one.
	mustOK(t, chromedp.Do(bctx))
	tctx, cancelSteps := context.WithTimeout(bctx, 90*time.Second)
	defer cancelSteps()

	shots := os.Getenv(screenshotsEnv)
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if shots == "" {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(shots, 0o755); err != nil {
				return err
			}
			path := filepath.Join(shots, "console-"+name+".png")
			t.Logf("screenshot %s", path)
			return os.WriteFile(path, png, 0o644)
		})
	}
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.Text(chromedp.ID(id)))
		mustOK(t, err)
		return s
	}

	// Unauthenticated, the console sends the browser to its sign-in form.
	mustOK(t, chromedp.Do(tctx,
		chromedp.Navigate(s.Endpoint+"/_fedgate/ui/"),
		chromedp.WaitVisible(chromedp.ID("access_key")),
	))
	loc, err := chromedp.Run(tctx, chromedp.Location())
	mustOK(t, err)
	if !strings.HasSuffix(loc, "/_fedgate/ui/login") {
		t.Fatalf("unauthenticated, the browser is at %s, want the sign-in form", loc)
	}

	// A wrong secret is refused.
	mustOK(t, chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("access_key"), rootAK),
		chromedp.SendKeys(chromedp.ID("secret_key"), "not-the-secret"),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	))
	if refusal := text("login-error"); !strings.Contains(refusal, "Sign-in failed") {
		t.Fatalf("a wrong secret: %q, want the sign-in refusal", refusal)
	}

	// The right keys sign in (the form keeps the access key typed).
	mustOK(t, chromedp.Do(tctx,
		chromedp.SetValue(chromedp.ID("access_key"), rootAK),
		chromedp.SendKeys(chromedp.ID("secret_key"), rootSK),
		shoot("login"),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("members")),
		shoot("overview"),
	))
	members, buckets, degraded := text("members"), text("buckets"), text("degraded")
	html := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.OuterHTML(chromedp.ID(id)))
		mustOK(t, err)
		return s
	}
	const badge = `class="badge bad">degraded<`
	bucketsHTML, degradedHTML := html("buckets"), html("degraded")
	for _, want := range []string{"n1", "n2", "n3", "Leader", st.Leader, "3 / 3"} {
		if !strings.Contains(members, want) {
			t.Errorf("the members section lacks %q:\n%s", want, members)
		}
	}
	for _, want := range []string{"ckpt", "erasure 2+1: a, b, c"} {
		if !strings.Contains(buckets, want) {
			t.Errorf("the buckets section lacks %q:\n%s", want, buckets)
		}
	}
	if !strings.Contains(degraded, "Degraded data") || !strings.Contains(degraded, "Store health") {
		t.Errorf("the degraded-data section:\n%s", degraded)
	}

	// The region counted the reads served degraded (on the node that read
	// the stores: the cached chunk's owner, so any of the three); the
	// console shows the bucket and its objects as degraded.
	var reads float64
	for _, n := range nodes {
		reads += degradedReads(t, n, "ckpt")
	}
	if reads == 0 {
		t.Errorf("no node counted degraded reads of ckpt with store a wiped")
	}
	if !strings.Contains(bucketsHTML, badge) || !strings.Contains(degradedHTML, badge) {
		t.Errorf("the console does not show ckpt as degraded:\n%s\n%s", buckets, degraded)
	}
	for _, want := range []string{"model/step-100.pt", "model/step-200.pt"} { // notes.txt lives inline in its manifest: no shard to lack
		if !strings.Contains(degraded, want) {
			t.Errorf("the degraded-data section does not list %s:\n%s", want, degraded)
		}
	}

	// Signing out ends the session.
	mustOK(t, chromedp.Do(tctx,
		chromedp.Click(chromedp.ID("sign-out")),
		chromedp.WaitVisible(chromedp.ID("access_key")),
		chromedp.Navigate(s.Endpoint+"/_fedgate/ui/"),
		chromedp.WaitVisible(chromedp.ID("access_key")),
	))
}

// degradedReads sums fedgate_degraded_reads_total of bucket on s.
func degradedReads(t *testing.T, s *server, bucket string) float64 {
	t.Helper()
	resp, err := http.Get(s.Endpoint + "/_fedgate/metrics")
	mustOK(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	mustOK(t, err)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "fedgate_degraded_reads_total{") || !strings.Contains(line, `bucket="`+bucket+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}
