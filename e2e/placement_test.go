package e2e

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fedgate/fedgate/internal/testenv"
)

// switchProxy forwards TCP to target while up; down closes the listener and
// every connection, so the server behind it looks stopped.
type switchProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	p := &switchProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustOK(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *switchProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
}

func (p *switchProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *switchProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	mustOK(p.t, err)
	p.serve(ln)
}

// TestErasureAcrossFourClouds: a bucket erasure-coded 4+2 over MinIO
// (aws), fake-gcs-server (gcp), Azurite (azure) and a posix NAS (onprem).
// With the S3 server stopped, every object reads back byte-identical
// through a fresh node; writes fail cleanly. The server comes back empty;
// `fedgate repair` rebuilds its shards, and the objects then read back
// with another store gone.
func TestErasureAcrossFourClouds(t *testing.T) {
	minio := testenv.MinIO(t)
	s3Bucket := minio.NewBucket(t)
	proxy := newSwitchProxy(t, strings.TrimPrefix(minio.Endpoint, "http://"))
	gcso, azo := gcsOrigin(t), azureOrigin(t)
	var stores strings.Builder
	stores.WriteString("  - name: s3\n    kind: s3\n    location: aws:us-east-1\n    bucket: " + s3Bucket +
		"\n    endpoint: http://" + proxy.addr + "\n    path_style: true\n    credentials: {access_key_env: FG_E2E_AK, secret_key_env: FG_E2E_SK}\n")
	t.Setenv("FG_E2E_AK", minio.AccessKey)
	t.Setenv("FG_E2E_SK", minio.SecretKey)
	for name, o := range map[string]originKind{"gcs": gcso, "az": azo} {
		y, env := o.store(t)
		stores.WriteString("  - name: " + name + "\n" + y)
		for k, v := range env {
			t.Setenv(k, v)
		}
	}
	nas := t.TempDir()
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" + stores.String() +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + nas + "}\n" +
		"buckets:\n  - name: ckpt\n    placement:\n      erasure: {data: 4, parity: 2, stores: [s3, gcs, az, nas]}\n" +
		"defaults: {store: nas}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()

	objects := map[string][]byte{
		"tiny":       []byte("a small object lives inline in its manifest"),
		"medium.bin": randBytes(t, 5<<20+17),
		"large.bin":  randBytes(t, 40<<20+3), // more than one 32 MiB segment
	}
	for k, v := range objects {
		put(t, c, "ckpt", k, v)
	}
	mp := randBytes(t, 11<<20)
	cu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String("multi.bin")})
	mustOK(t, err)
	var parts []types.CompletedPart
	for i, span := range [][2]int{{0, 6 << 20}, {6 << 20, 11 << 20}} {
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: aws.String("ckpt"), Key: aws.String("multi.bin"), UploadId: cu.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(mp[span[0]:span[1]])})
		mustOK(t, err)
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	_, err = c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: aws.String("ckpt"), Key: aws.String("multi.bin"),
		UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	mustOK(t, err)
	objects["multi.bin"] = mp

	lo, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("ckpt")})
	mustOK(t, err)
	if len(lo.Contents) != len(objects) {
		t.Fatalf("listing shows %d entries for %d objects (shards or manifests leaking?)", len(lo.Contents), len(objects))
	}

	// Stop the S3 server. A fresh node (empty cache) reads every object.
	proxy.down()
	// The fresh node is a second one-node region of the same name on the
	// same default store, which a node refuses unless the first region's
	// marker is gone (docs/operations.md, a region's identity).
	mustOK(t, os.RemoveAll(filepath.Join(nas, "d_fedgate")))
	fresh := startServer(t, "--config", pf)
	for k, v := range objects {
		if got, _ := getBytes(t, fresh.root(), "ckpt", k); !bytes.Equal(got, v) {
			t.Fatalf("%s with the S3 store down: %d bytes, differs", k, len(got))
		}
	}
	if _, err := fresh.root().PutObject(ctx(t), putInput("ckpt", "while-down", []byte("x"))); err == nil {
		t.Fatal("a write with one store of the layout down succeeded")
	}

	// The server comes back empty: delete everything it held, behind fedgate's back.
	direct := clientFor(minio.Endpoint, minio.AccessKey, minio.SecretKey)
	proxy.up()
	pg := s3.NewListObjectsV2Paginator(direct, &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket)})
	lost := 0
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx(t))
		mustOK(t, err)
		for _, o := range page.Contents {
			_, err := direct.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String(s3Bucket), Key: o.Key})
			mustOK(t, err)
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("the S3 store held no shards or manifests")
	}
	out, err := s.fedgate("repair", "ckpt")
	if err != nil || !strings.Contains(out, "4 objects") || strings.Contains(out, " 0 repaired") {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	out, err = s.fedgate("repair", "ckpt")
	if err != nil || !strings.Contains(out, "4 healthy") {
		t.Fatalf("second repair: %v\n%s", err, out)
	}
	// All shards are back: the objects read with the NAS gone instead.
	mustOK(t, os.Rename(nas, nas+".gone"))
	again := startServer(t, "--config", pf)
	for k, v := range objects {
		if got, _ := getBytes(t, again.root(), "ckpt", k); !bytes.Equal(got, v) {
			t.Fatalf("%s after repair, with the NAS gone: differs", k)
		}
	}
}
