package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// curl runs the real curl with no credentials and returns the status code
// and body.
func curl(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	return s[i+1:], s[:i]
}

// Issue 11's "done when": a policy granting s3:GetObject on
// arn:aws:s3:::datasets/public/* to * lets curl read datasets/public/x and
// nothing else; a deny on a prefix beats a grant; both survive a restart.
func TestBucketPolicyWithCurl(t *testing.T) {
	s := startServer(t)
	c := s.root()
	mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("datasets")})))
	put(t, c, "datasets", "public/x", []byte("open data"))
	put(t, c, "datasets", "private/y", []byte("closed"))
	put(t, c, "datasets", "secret/z", []byte("secret"))
	url := s.Endpoint + "/datasets/"
	if code, _ := curl(t, url+"public/x"); code != "403" {
		t.Fatalf("curl before any policy: %s", code)
	}
	policy := `{"Version":"2012-10-17","Statement":[
	 {"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/public/*"},
	 {"Sid":"NoSecrets","Effect":"Deny","Principal":{"AWS":"arn:aws:iam::000000000000:user/alice"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/secret/*"}]}`
	mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(policy)})))

	out, err := s.fedgate("user", "add", "alice")
	mustOK(t, err)
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add printed no keys:\n%s", out)
	}
	if out, err := s.fedgate("user", "grant", "alice", "datasets", "read"); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	check := func(when string) {
		t.Helper()
		url := s.Endpoint + "/datasets/" // a restart may move the port
		alice := s.s3Client(m[1], m[2])
		if code, body := curl(t, url+"public/x"); code != "200" || body != "open data" {
			t.Errorf("%s: curl public/x = %s %q", when, code, body)
		}
		for _, u := range []string{url + "private/y", url + "secret/z", url + "public/none", url + "?list-type=2", url + "?policy", s.Endpoint + "/"} {
			if code, body := curl(t, u); code != "403" || !strings.Contains(body, "<Code>AccessDenied</Code>") {
				t.Errorf("%s: curl %s = %s %s, want 403 AccessDenied", when, u, code, body)
			}
		}
		if code, _ := curl(t, "-X", "PUT", "--data-binary", "x", url+"public/new"); code != "403" {
			t.Errorf("%s: anonymous PUT = %s", when, code)
		}
		if got, _ := getBytes(t, alice, "datasets", "private/y"); string(got) != "closed" {
			t.Errorf("%s: alice's read grant does not read private/y", when)
		}
		_, err := alice.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("secret/z")})
		if apiCode(err) != "AccessDenied" {
			t.Errorf("%s: alice reading secret/z despite the deny: %v", when, err)
		}
	}
	check("after PutBucketPolicy")
	s.restart(syscall.SIGTERM)
	check("after a restart")
}

// The region-wide Block Public Access of the policy file refuses public
// policies and ACLs on every bucket, whatever the bucket says.
func TestRegionPublicAccessBlock(t *testing.T) {
	policy := "regions:\n  - {name: lab, location: onprem:lga1}\nstores:\n" +
		"  - {name: nas, kind: posix, location: onprem:lga1, path: " + t.TempDir() + "}\n" +
		"buckets:\n  - {name: datasets, placement: {single: nas}}\n" +
		"defaults:\n  store: nas\n  public_access_block: {block_public_policy: true, block_public_acls: true}\n"
	pf := filepath.Join(t.TempDir(), "policy.yaml")
	mustOK(t, os.WriteFile(pf, []byte(policy), 0o644))
	s := startServer(t, "--config", pf)
	c := s.root()
	_, err := c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(
		`{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`)})
	if apiCode(err) != "AccessDenied" || !strings.Contains(err.Error(), "BlockPublicPolicy") {
		t.Errorf("public policy under the region's BlockPublicPolicy: %v", err)
	}
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("k"), Body: strings.NewReader("v"), ACL: "public-read"})
	if apiCode(err) != "AccessDenied" {
		t.Errorf("public-read PUT under the region's BlockPublicAcls: %v", err)
	}
	// A policy for users of the region is not public and is accepted.
	mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(
		`{"Statement":{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::datasets/*"}}`)})))
}

// aws:SecureTransport is true on the TLS port: a policy that opens a
// prefix only over TLS serves curl over https and not over plain http.
func TestSecureTransportCondition(t *testing.T) {
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject",
	 "Resource":"arn:aws:s3:::datasets/*","Condition":{"Bool":{"aws:SecureTransport":"true"}}}]}`
	p := newS3PKI(t)
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{{"https", p.flags(), "200"}, {"http", nil, "403"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.flags...)
			c := s.root()
			if tc.flags != nil {
				c = p.client(s.Endpoint)
			}
			mustOK(t, must(c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("datasets")})))
			put(t, c, "datasets", "x", []byte("x"))
			mustOK(t, must(c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("datasets"), Policy: aws.String(policy)})))
			if code, body := curl(t, "--cacert", p.caFile, s.Endpoint+"/datasets/x"); code != tc.want {
				t.Errorf("anonymous GET over %s = %s %s, want %s", tc.name, code, body, tc.want)
			}
		})
	}
}
