package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/chromedp"

	"github.com/fedgate/fedgate/gateway/console"
	"github.com/fedgate/fedgate/internal/testenv"
)

// TestConsoleChartsInChromium: a real server sampling its metrics every
// 50 ms (so its "hour" chart spans 18 s) takes a few seconds of SDK
// load (PUTs, GETs that miss and then hit the cache, HEADs, listings) on
// a bucket erasure-coded over stores in another location (so it is cached,
// and there is egress to chart); headless Chromium signs in, opens the charts page and takes a
// screenshot. The charts must hold what was measured: the requests chart
// has a line per operation with points, the PNG decodes and the charts
// of requests, bytes, hit ratio, egress and latency have their series'
// colours drawn, and the admin API's JSON agrees.
func TestConsoleChartsInChromium(t *testing.T) {
	browser := testenv.Chromium(t)
	dir := t.TempDir()
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + filepath.Join(dir, "nas") + "}\n" +
		"  - {name: a, kind: posix, location: aws:us-east-1, path: " + filepath.Join(dir, "a") + "}\n" +
		"  - {name: b, kind: posix, location: aws:us-east-1, path: " + filepath.Join(dir, "b") + "}\n" +
		"  - {name: c, kind: posix, location: aws:us-east-1, path: " + filepath.Join(dir, "c") + "}\n" +
		"buckets:\n  - name: datasets\n    placement:\n      erasure: {data: 2, parity: 1, stores: [a, b, c]}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(dir, "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf, "--region", "lab", "--cache-size", "256MiB", "--console-chart-interval", "50ms")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.WindowSize(1300, 1500),
		chromedp.DisableGPU,
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	mustOK(t, chromedp.Do(bctx))
	tctx, cancelSteps := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelSteps()

	// Sign in first, so the load is fresh when the charts are drawn.
	mustOK(t, chromedp.Do(tctx,
		chromedp.Navigate(s.Endpoint+"/_fedgate/ui/login"),
		chromedp.WaitVisible(chromedp.ID("access_key")),
		chromedp.SendKeys(chromedp.ID("access_key"), rootAK),
		chromedp.SendKeys(chromedp.ID("secret_key"), rootSK),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("nav-charts")),
	))

	// Load: 6 s of PUTs, GETs (the first read of a version misses the
	// cache, the next ones hit), HEADs and listings.
	c := s.root()
	var ops atomic.Int64
	body := randBytes(t, 192<<10)
	for i := range 12 {
		put(t, c, "datasets", fmt.Sprintf("shard-%02d", i), body)
	}
	deadline := time.Now().Add(6 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("shard-%02d", i%12)
		if i%4 == 0 {
			put(t, c, "datasets", key, body)
			ops.Add(1)
		}
		for range 3 {
			if got, _ := getBytes(t, c, "datasets", key); !bytes.Equal(got, body) {
				t.Fatalf("GET %s: %d bytes, differs", key, len(got))
			}
			ops.Add(1)
		}
		_, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("datasets"), Key: aws.String(key)})
		mustOK(t, err)
		if i%10 == 0 {
			_, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("datasets")})
			mustOK(t, err)
		}
	}
	t.Logf("load: %d PUTs and GETs", ops.Load())

	var shot []byte
	var svgRequests string
	charts := map[string][]byte{}
	mustOK(t, chromedp.Do(tctx,
		chromedp.Navigate(s.Endpoint+"/_fedgate/ui/charts"),
		chromedp.WaitVisible(chromedp.ID("chart-requests")),
	))
	var err error
	if svgRequests, err = chromedp.Run(tctx, chromedp.OuterHTML(chromedp.ID("chart-requests"))); err != nil {
		t.Fatal(err)
	}
	if shot, err = chromedp.Run(tctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	for _, panel := range []string{"requests", "bytes-served", "hit-ratio", "egress-bytes", "egress-cost", "latency"} {
		png, err := chromedp.Run(tctx, chromedp.Screenshot(chromedp.ID("chart-"+panel)))
		mustOK(t, err)
		charts[panel] = png
	}

	// The page's requests chart: a line with points for each operation
	// the load used.
	lines := map[string]int{}
	for _, m := range regexp.MustCompile(`<path class="series" data-series="([^"]*)" data-points="(\d+)"`).FindAllStringSubmatch(svgRequests, -1) {
		lines[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, op := range []string{"GetObject", "PutObject", "HeadObject"} {
		if lines[op] < 5 {
			t.Errorf("the requests chart's %s line has %d points, want 5 or more (lines: %v)", op, lines[op], lines)
		}
	}

	// Keep the screenshot in the test's temporary directory, and with
	// FEDGATE_CONSOLE_SCREENSHOTS set, the docs' image (scaled to 70%, to
	// stay small) there.
	path := filepath.Join(t.TempDir(), "console-charts.png")
	mustOK(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot %s (%d bytes)", path, len(shot))
	if out := os.Getenv(screenshotsEnv); out != "" {
		small, err := chromedp.Run(tctx, chromedp.ScreenshotScale(chromedp.CSS("main"), 0.7))
		mustOK(t, err)
		mustOK(t, os.MkdirAll(out, 0o755))
		mustOK(t, os.WriteFile(filepath.Join(out, "console-charts.png"), small, 0o644))
		t.Logf("screenshot %s (%d bytes)", filepath.Join(out, "console-charts.png"), len(small))
	}

	img, err := png.Decode(bytes.NewReader(shot))
	mustOK(t, err)
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 1000 {
		t.Errorf("the screenshot is %dx%d", b.Dx(), b.Dy())
	}
	// Each chart has its lines drawn: pixels of a series colour.
	for panel, data := range charts {
		img, err := png.Decode(bytes.NewReader(data))
		mustOK(t, err)
		if n := seriesPixels(img); n < 30 {
			t.Errorf("the %s chart has %d pixels of a series colour, want a drawn line", panel, n)
		}
		mustOK(t, os.WriteFile(filepath.Join(t.TempDir(), panel+".png"), data, 0o644))
	}

	// Scripts get the same panel as JSON from the admin API.
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, s.Endpoint+"/_fedgate/admin/console/panels/requests", nil)
	mustOK(t, err)
	resp, err := http.DefaultClient.Do(req)
	mustOK(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned JSON request: %d, want 403", resp.StatusCode)
	}
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req.Header.Set("x-amz-content-sha256", emptySHA256)
	mustOK(t, v4.NewSigner().SignHTTP(ctx(t), aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}, req, emptySHA256, "s3", "us-east-1", time.Now()))
	resp, err = http.DefaultClient.Do(req)
	mustOK(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p console.ChartPanel
	if err := json.Unmarshal(raw, &p); err != nil || resp.StatusCode != 200 {
		t.Fatalf("signed JSON request: %d %v\n%s", resp.StatusCode, err, raw)
	}
	var gets float64
	for _, sr := range p.Series {
		if sr.Name != "GetObject" {
			continue
		}
		for _, v := range sr.Points {
			if v.V != nil {
				gets += *v.V * p.StepSeconds
			}
		}
	}
	if gets < 10 || p.StepSeconds != 0.05 {
		t.Errorf("the JSON counts %.0f GETs over the window (step %vs)", gets, p.StepSeconds)
	}

	// The curl command docs/console.md gives (curl's own SigV4).
	curl, err := exec.LookPath("curl")
	mustOK(t, err)
	cmd := exec.CommandContext(ctx(t), curl, "-sS", "--fail-with-body", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", rootAK+":"+rootSK,
		"-H", "x-amz-content-sha256: "+emptySHA256, s.Endpoint+"/_fedgate/admin/console/panels?window=day")
	raw, err = cmd.CombinedOutput()
	var list console.ChartPanelList
	if err != nil || json.Unmarshal(raw, &list) != nil || list.Window != "day" || len(list.Panels) != len(console.ChartPanels) {
		t.Errorf("curl --aws-sigv4: %v\n%s", err, raw)
	}
}

// seriesPixels counts the pixels of img near one of the charts' series
// colours (gateway's chartColors) in the chart's upper 65%: the plot above
// its zero line, so neither the legend's swatches nor a line at 0 count.
func seriesPixels(img image.Image) int {
	colours := [][3]int{{0x24, 0x52, 0x7a}, {0xd0, 0x66, 0x1e}, {0x2a, 0x8c, 0x4a}, {0xa4, 0x16, 0x1a}}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Min.Y+b.Dy()*65/100; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for _, c := range colours {
				if absInt(int(r>>8)-c[0]) < 24 && absInt(int(g>>8)-c[1]) < 24 && absInt(int(bl>>8)-c[2]) < 24 {
					n++
					break
				}
			}
		}
	}
	return n
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
