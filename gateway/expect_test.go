package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fedgate/fedgate/gateway"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// An empty body sent with Expect: 100-continue is invited (100 Continue,
// then the answer), as botocore waits for it: without, Debian's boto3
// left its connection so that the next request waited a minute
// (scripts/test-tools.sh, an upload_file of an empty file).
func TestEmptyBodyWithExpectContinue(t *testing.T) {
	srv, err := gateway.New(gateway.Config{Backend: gatewaytest.New()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "PUT /_fedgate/healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 Continue") {
		t.Fatalf("first line %q, %v; want HTTP/1.1 100 Continue", line, err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the answer after 100 Continue: %v", err)
	}
	resp.Body.Close()
}
