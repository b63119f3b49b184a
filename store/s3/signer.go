package s3

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// rotatingSigner is the SDK's SigV4 signer, made anew when the secret key
// changes. The SDK's signer caches its derived signing key by access key
// id and day only, so a secret rotated under the same access key id (a
// credential file rewritten, see Config.Credentials) would be signed with
// the old secret until midnight UTC.
type rotatingSigner struct {
	mu     sync.Mutex
	secret string
	signer *v4.Signer
}

func newRotatingSigner() *rotatingSigner { return &rotatingSigner{signer: newV4Signer()} }

// newV4Signer is the signer the SDK's S3 client makes by default.
func newV4Signer() *v4.Signer {
	return v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true })
}

func (r *rotatingSigner) SignHTTP(ctx context.Context, creds aws.Credentials, req *http.Request, payloadHash, service, region string,
	signingTime time.Time, optFns ...func(*v4.SignerOptions)) error {
	r.mu.Lock()
	if creds.SecretAccessKey != r.secret {
		r.secret, r.signer = creds.SecretAccessKey, newV4Signer()
	}
	s := r.signer
	r.mu.Unlock()
	return s.SignHTTP(ctx, creds, req, payloadHash, service, region, signingTime, optFns...)
}
