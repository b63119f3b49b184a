package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fedgate/fedgate/internal/testserver"
	"github.com/fedgate/fedgate/internal/wait"
)

// s3PKI is a CA and the S3 port's certificate files it issued (serial
// 100, 127.0.0.1).
type s3PKI struct {
	ca                *testserver.CA
	cert, key, caFile string
}

func newS3PKI(t *testing.T) s3PKI {
	t.Helper()
	dir := t.TempDir()
	p := s3PKI{ca: testserver.NewCA(t), cert: filepath.Join(dir, "s3.pem"), key: filepath.Join(dir, "s3.key"), caFile: filepath.Join(dir, "s3-ca.pem")}
	p.ca.Issue(t, p.cert, p.key, 100, time.Now().Add(24*time.Hour))
	p.ca.WriteCA(t, p.caFile)
	return p
}

func (p s3PKI) flags() []string { return []string{"--cert-file", p.cert, "--key-file", p.key} }

// client is an aws-sdk-go-v2 client of endpoint that trusts the CA.
func (p s3PKI) client(endpoint string) *s3.Client {
	return clientFor(endpoint, rootAK, rootSK, func(o *s3.Options) {
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = &tls.Config{RootCAs: p.ca.Pool()}
		})
	})
}

// serial is the serial of the certificate a new handshake with the server
// at endpoint presents.
func (p s3PKI) serial(t *testing.T, endpoint string) *big.Int {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(endpoint, "https://"), &tls.Config{RootCAs: p.ca.Pool()})
	mustOK(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestS3TLS: `fedgate server --cert-file --key-file` serves S3 over HTTPS
// only: aws-sdk-go-v2 with the CA puts and gets, plain HTTP is refused,
// the CLI talks to it with --ca-file or FEDGATE_CA_FILE (and says what to
// do without), the console signs in over it with a Secure cookie, and
// SIGHUP swaps the certificate (a broken file keeps the old one and logs
// an ERROR naming it).
func TestS3TLS(t *testing.T) {
	p := newS3PKI(t)
	s := startServer(t, p.flags()...)
	if !strings.HasPrefix(s.Endpoint, "https://127.0.0.1:") {
		t.Fatalf("the server printed the endpoint %s, want https://", s.Endpoint)
	}
	c := p.client(s.Endpoint)
	_, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("secure")})
	mustOK(t, err)
	data := payload("tls", 5<<20)
	put(t, c, "secure", "big", data)
	if got, _ := getBytes(t, c, "secure", "big"); string(got) != string(data) {
		t.Fatal("an object put over https reads back wrong")
	}

	// Plain HTTP gets the TLS server's refusal.
	resp, err := http.Get("http://" + strings.TrimPrefix(s.Endpoint, "https://") + "/secure/big")
	mustOK(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Fatalf("plain HTTP to the S3 port: %s %q", resp.Status, body)
	}

	t.Run("cli", func(t *testing.T) {
		out, err := s.fedgate("user", "add", "alice", "--ca-file", p.caFile)
		if err != nil || !strings.Contains(out, "User alice created") {
			t.Fatalf("user add with --ca-file: %v\n%s", err, out)
		}
		cmd := exec.Command(binary, "user", "list")
		cmd.Env = append(os.Environ(), "FEDGATE_ENDPOINT="+s.Endpoint, "FEDGATE_ACCESS_KEY="+rootAK, "FEDGATE_SECRET_KEY="+rootSK,
			"FEDGATE_CA_FILE="+p.caFile)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "alice") {
			t.Fatalf("user list with FEDGATE_CA_FILE: %v\n%s", err, out)
		}
		out, err = s.fedgate("user", "list")
		if err == nil || !strings.Contains(out, "certificate") || !strings.Contains(out, "--ca-file or FEDGATE_CA_FILE") {
			t.Fatalf("user list without the CA: %v\n%s; want a certificate error naming --ca-file", err, out)
		}
		out, err = s.fedgate("cluster", "status", "--endpoint", "http://"+strings.TrimPrefix(s.Endpoint, "https://"))
		if err == nil || !strings.Contains(out, "HTTPS") {
			t.Fatalf("cluster status over http://: %v\n%s; want the server's refusal", err, out)
		}
	})

	t.Run("console", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool()}}}
		form := url.Values{"access_key": {rootAK}, "secret_key": {rootSK}}
		req, _ := http.NewRequest(http.MethodPost, s.Endpoint+"/_fedgate/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.Endpoint)
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := hc.Do(req)
		mustOK(t, err)
		resp.Body.Close()
		setCookie := resp.Header.Get("Set-Cookie")
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(setCookie, "Secure") {
			t.Fatalf("console sign-in over https: %s, Set-Cookie %q; want 303 and a Secure cookie", resp.Status, setCookie)
		}
		hc.CheckRedirect = nil
		resp, err = hc.Get(s.Endpoint + "/_fedgate/ui/")
		mustOK(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="members"`) || !strings.Contains(string(page), "secure") {
			t.Fatalf("the console over https: %s\n%.2000s", resp.Status, page)
		}
	})

	t.Run("sighup", func(t *testing.T) {
		if got := p.serial(t, s.Endpoint); got.Int64() != 100 {
			t.Fatalf("served serial %v, want 100", got)
		}
		p.ca.Issue(t, p.cert, p.key, 200, time.Now().Add(48*time.Hour))
		mustOK(t, s.Signal(syscall.SIGHUP))
		wait.For(t, 10*time.Second, "the new certificate after SIGHUP", func() bool { return p.serial(t, s.Endpoint).Int64() == 200 })
		put(t, c, "secure", "after-hup", []byte("renewed"))

		mustOK(t, os.WriteFile(p.key, []byte("not a key\n"), 0o600))
		mustOK(t, s.Signal(syscall.SIGHUP))
		wait.For(t, 10*time.Second, "the failed reload's ERROR", func() bool {
			return strings.Contains(s.Log(), "TLS certificate reload failed")
		})
		for line := range strings.SplitSeq(s.Log(), "\n") {
			if strings.Contains(line, "TLS certificate reload failed") &&
				(!strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, "--key-file "+p.key)) {
				t.Errorf("the failed reload's log line is not an ERROR naming --key-file %s:\n%s", p.key, line)
			}
		}
		if s.Exited() {
			t.Fatalf("SIGHUP with a broken key ended the server:\n%s", s.Log())
		}
		if got := p.serial(t, s.Endpoint); got.Int64() != 200 {
			t.Fatalf("after a failed reload the served serial is %v, want 200 still", got)
		}
		if got, _ := getBytes(t, c, "secure", "after-hup"); string(got) != "renewed" {
			t.Fatalf("GET after a failed reload: %q", got)
		}
	})
}

// TestS3TLSStartErrors: --cert-file without --key-file, and a key that is
// not the certificate's, stop `fedgate server` at once with a message
// naming the flag and file.
func TestS3TLSStartErrors(t *testing.T) {
	p, other := newS3PKI(t), newS3PKI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert-file", p.cert}, "--cert-file is given without --key-file"},
		{[]string{"--key-file", p.key}, "--key-file is given without --cert-file"},
		{[]string{"--cert-file", p.cert, "--key-file", other.key}, "--key-file " + other.key + " is not the key of the certificate in --cert-file " + p.cert},
		{[]string{"--cert-file", p.key, "--key-file", p.key}, "--cert-file " + p.key + ": no PEM certificate"},
	} {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(c, binary, append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
			"--access-key", rootAK, "--secret-key", rootSK}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("fedgate server %s: %v\n%s\nwant exit status 1 and %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}

// TestClusterS3TLS: a region of three processes with TLS on their S3 ports
// (one CA, trusted with --ca-file) and peer TLS (another CA): the nodes
// join through --join addresses without a scheme, advertise https S3
// addresses, and a write-back PUT through a follower reads back through
// another node.
func TestClusterS3TLS(t *testing.T) {
	p := newS3PKI(t)
	peerCert, peerKey, peerCA := peerPKI(t)
	t.Setenv("FEDGATE_CA_FILE", p.caFile) // the CLI the harness runs (cluster status)
	r := startRegion(t, 3, append(p.flags(), "--ca-file", p.caFile,
		"--peer-cert-file", peerCert, "--peer-key-file", peerKey, "--peer-ca-file", peerCA)...)
	st := r.settle(3)
	for _, m := range st.Members {
		if !strings.HasPrefix(m.HTTP, "https://127.0.0.1:") {
			t.Errorf("member %s's S3 address is %q, want https", m.ID, m.HTTP)
		}
	}
	var follower, other *server
	for id, s := range r.byID {
		switch {
		case id == st.Leader:
		case follower == nil:
			follower = s
		default:
			other = s
		}
	}
	data := payload("s3-tls", 3<<20)
	put(t, p.client(follower.Endpoint), "ckpt", "over-https", data)
	if got, _ := getBytes(t, p.client(other.Endpoint), "ckpt", "over-https"); string(got) != string(data) {
		t.Fatal("a write-back object put over https reads back wrong through another node")
	}
	// The S3 certificate is not a peer certificate: the internal port
	// still wants the peer CA's.
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := hc.Get("https://" + r.internal[0] + "/_fedgate/internal/info"); err == nil {
		resp.Body.Close()
		t.Fatalf("the internal port answered a client trusting the S3 CA: %s", resp.Status)
	}
}
