package gateway_test

import (
	"fmt"

	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

const statusPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":%s,"Action":["s3:ListBucket","s3:GetObject"],"Resource":["arn:aws:s3:::ps","arn:aws:s3:::ps/*"]%s}]}`

// GetBucketPolicyStatus as ceph's s3-tests check it
// (test_get_*_bucket_policy_status).
func TestBucketPolicyStatus(t *testing.T) {
	e := newEnv(t)
	e.bucket("ps")
	status := func(what string, want bool) {
		t.Helper()
		st, err := e.root.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String("ps")})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := aws.ToBool(st.PolicyStatus.IsPublic); got != want {
			t.Errorf("%s: IsPublic %v, want %v", what, got, want)
		}
	}
	putPolicy := func(principal, cond string) error {
		_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("ps"), Policy: aws.String(fmt.Sprintf(statusPolicy, principal, cond))})
		return err
	}
	putACL := func(acl types.BucketCannedACL) {
		_, err := e.root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String("ps"), ACL: acl})
		noErr(t, err)
	}

	status("no policy", false)
	putACL(types.BucketCannedACLPublicRead)
	status("public-read ACL", true)
	putACL(types.BucketCannedACLAuthenticatedRead)
	status("authenticated-read ACL", true)
	_, err := e.root.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String("ps"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{IgnorePublicAcls: aws.Bool(true)}})
	noErr(t, err)
	status("authenticated-read ACL, ignored", false)
	_, err = e.root.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String("ps")})
	noErr(t, err)
	putACL(types.BucketCannedACLPrivate)
	status("private ACL", false)

	noErr(t, putPolicy(`{"AWS":"*"}`, ""))
	status("policy allowing everyone", true)
	noErr(t, putPolicy(`{"AWS":"*"}`, `,"Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/32"}}`))
	status("policy allowing one address", false)
	noErr(t, putPolicy(`{"AWS":"arn:aws:iam::111122223333:root"}`, ""))
	status("policy naming an account", false)
	noErr(t, putPolicy(`{"AWS":"arn:aws:iam::000000000000:user/alice"}`, ""))
	status("policy naming a user", false)
	_, err = e.root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("ps")})
	noErr(t, err)
	status("policy deleted", false)

	_, err = e.root.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String("nosuch")})
	wantErr(t, err, "NoSuchBucket", 404)
	_, err = e.user.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String("ps")})
	wantErr(t, err, "AccessDenied", 403)
}

// BlockPublicPolicy refuses only public policies: one naming a principal
// is not (s3-tests' test_block_public_policy_with_principal).
func TestBlockPublicPolicyWithPrincipal(t *testing.T) {
	e := newEnv(t)
	e.bucket("ps")
	_, err := e.root.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String("ps"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true)}})
	noErr(t, err)
	put := func(principal, cond string) error {
		_, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("ps"), Policy: aws.String(fmt.Sprintf(statusPolicy, principal, cond))})
		return err
	}
	for _, p := range []string{`{"AWS":"arn:aws:iam::111122223333:root"}`, `{"AWS":"111122223333"}`,
		`{"AWS":"arn:aws:iam::000000000000:user/alice"}`, `{"CanonicalUser":"alice"}`} {
		if err := put(p, ""); err != nil {
			t.Errorf("principal %s refused: %v", p, err)
		}
	}
	noErr(t, put(`"*"`, `,"Condition":{"IpAddress":{"aws:SourceIp":"192.168.1.0/24"}}`))
	wantErr(t, put(`"*"`, ""), "AccessDenied", 403)
	wantErr(t, put(`{"AWS":"*"}`, ""), "AccessDenied", 403)
	// An account that is not 12 digits (radosgw's tenant names) is not an
	// AWS principal.
	wantErr(t, put(`{"AWS":"arn:aws:iam::s3tenant1:root"}`, ""), "MalformedPolicy", 400)
}
