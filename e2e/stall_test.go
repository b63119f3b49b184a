package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/fedgate/fedgate/internal/wait"
)

// stallPut opens a connection from local, sends a PUT of path that
// announces 1000 body bytes and sends 3, and leaves it so (the probe's
// denial of service). It returns nil when the server refused the
// connection outright.
func stallPut(addr, local, path string) net.Conn {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	if _, err := fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\nabc", path, addr); err != nil {
		c.Close()
		return nil
	}
	return c
}

// 600 stalled anonymous PUTs from one address, to a bucket anonymous users
// may not write and to one they may, on a node limited to 512 descriptors,
// leave a signed GET from another address answering in under a second.
func TestStalledAnonymousPutsDoNotStarveSignedReads(t *testing.T) {
	s := startServer(t, "--body-timeout", "60s")
	c := s.root()
	for _, b := range []string{"private-data", "public-drop"} {
		mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(b)})))
	}
	mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("public-drop"), Policy: aws.String(
		`{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::public-drop/*"}}`)})))
	mustOK(t, must(c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("private-data"), Key: aws.String("sample"), Body: strings.NewReader("the real user's sample")})))

	lim := unix.Rlimit{Cur: 512, Max: 512}
	if err := unix.Prlimit(s.Pid(), unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatalf("limit the server to 512 descriptors: %v", err)
	}
	addr := strings.TrimPrefix(s.Endpoint, "http://")
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/private-data/x"
			if i%2 == 1 {
				path = "/public-drop/x"
			}
			if c := stallPut(addr, "127.0.0.2", fmt.Sprintf("%s%d", path, i)); c != nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // let the server take them all in
	// A fresh client (no pooled connection) from another address.
	reader := s.s3Client(rootAK, rootSK, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}}
	})
	for i := range 5 {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		out, err := reader.GetObject(cctx, &s3.GetObjectInput{Bucket: aws.String("private-data"), Key: aws.String("sample")})
		if err != nil {
			cancel()
			t.Fatalf("signed GET %d with 600 stalled PUTs open: %v\nserver log:\n%s", i, err, tail(s.Log(), 2000))
		}
		data, err := io.ReadAll(out.Body)
		out.Body.Close()
		cancel()
		if err != nil || string(data) != "the real user's sample" {
			t.Fatalf("signed GET %d: %q, %v", i, data, err)
		}
		t.Logf("signed GET %d answered in %v", i, time.Since(start))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// A signed PUT whose body stops arriving fails within --body-timeout with
// RequestTimeout and leaves nothing of its body on the node's disks.
func TestStalledSignedPutLeavesNoStaging(t *testing.T) {
	s := startServer(t, "--body-timeout", "2s")
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("uploads")})))
	marker := "STALLED-BODY-MARKER-7f3a"
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, marker) }()
	req, err := http.NewRequest(http.MethodPut, s.Endpoint+"/uploads/stalled.bin", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1 << 20
	req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
	creds := aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("no answer to a stalled signed PUT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("<Code>RequestTimeout</Code>")) {
		t.Fatalf("status %d, body %s; want 400 RequestTimeout", resp.StatusCode, body)
	}
	if took > 4*time.Second {
		t.Errorf("answered after %v; want within the 2s --body-timeout (and a little)", took)
	}
	// Nothing of the body stays anywhere under the data dir (staging
	// files included).
	wait.For(t, 5*time.Second, "no file under the data dir holds the stalled body", func() bool {
		found := ""
		_ = filepath.WalkDir(s.DataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, "server.log") {
				return nil
			}
			if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(marker)) {
				found = p
			}
			return nil
		})
		if found != "" {
			t.Logf("still holds the body: %s", found)
		}
		return found == ""
	})
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("uploads"), Key: aws.String("stalled.bin")}); err == nil {
		t.Fatal("the stalled PUT left an object")
	}
}

// An unauthorized PUT that asks Expect: 100-continue is answered 403 at
// once, without 100 Continue (S3's answer), by the real server.
func TestUnauthorizedExpectContinueGets403WithoutContinue(t *testing.T) {
	s := startServer(t)
	mustOK(t, must(s.root().CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("private-data")})))
	addr := strings.TrimPrefix(s.Endpoint, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	mustOK(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprintf(c, "PUT /private-data/x HTTP/1.1\r\nHost: %s\r\nContent-Length: 1048576\r\nExpect: 100-continue\r\n\r\n", addr)
	mustOK(t, err)
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, 12)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if line := string(buf[:n]); !strings.HasPrefix(line, "HTTP/1.1 403") {
		t.Fatalf("first answer %q, want HTTP/1.1 403 (no 100 Continue)", line)
	}
}
