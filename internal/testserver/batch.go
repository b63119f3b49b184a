package testserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/fedgate/fedgate/gateway"
)

// BatchRequest returns a POST of body (a batch GET's JSON) to endpoint,
// signed as a client signs it: SigV4 with ak/sk, service s3, region
// us-east-1, the payload's SHA-256.
func BatchRequest(ctx context.Context, endpoint, ak, sk string, body []byte) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+gateway.BatchPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Amz-Content-Sha256", hash)
	if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, hr, hash, "s3", "us-east-1", time.Now()); err != nil {
		return nil, err
	}
	return hr, nil
}
