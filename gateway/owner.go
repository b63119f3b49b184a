package gateway

import (
	"net/http"

	"github.com/fedgate/fedgate/gateway/s3err"
)

// AccountID is the AWS account id of every fedgate bucket. fedgate users
// are, in AWS's terms, IAM users of one account: bucket policies name
// them arn:aws:iam::000000000000:user/NAME (docs/security.md), and the
// account owns every bucket, whichever user created it. So
// x-amz-expected-bucket-owner matches when it is this id. (ACL owner ids
// and grantees are user names, S3's canonical ids, which is another
// thing: docs/s3-compatibility.md.)
const AccountID = "000000000000"

// checkExpectedOwner answers 403 AccessDenied, as S3 does, when the request
// names an expected bucket owner (x-amz-expected-bucket-owner, and for a
// copy's source x-amz-source-expected-bucket-owner) other than the account
// that owns the buckets.
func checkExpectedOwner(r *http.Request, bucket string) error {
	if bucket == "" {
		return nil
	}
	for _, h := range []string{"x-amz-expected-bucket-owner", "x-amz-source-expected-bucket-owner"} {
		if vs, ok := r.Header[http.CanonicalHeaderKey(h)]; ok && (len(vs) != 1 || vs[0] != AccountID) {
			return s3err.Newf(s3err.CodeAccessDenied, "Access Denied: %s does not name the bucket owner's account (fedgate's buckets belong to account %s)", h, AccountID)
		}
	}
	return nil
}
