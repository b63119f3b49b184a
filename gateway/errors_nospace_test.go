package gateway_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// A full device answers 507 InsufficientStorage saying so, but the answer
// does not carry the server's filesystem paths the store's error names
// (issue 35).
func TestInsufficientStorageHidesPaths(t *testing.T) {
	// A real ENOSPC, with the path the kernel refused to write to, as a
	// store wraps it.
	werr := os.WriteFile("/dev/full", []byte("x"), 0)
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Skipf("writing /dev/full: %v, want ENOSPC", werr)
	}
	for name, err := range map[string]error{
		"ENOSPC": fmt.Errorf("posix: put %q: %w", "k", werr),
		"EDQUOT": fmt.Errorf("posix: put %q: %w", "k", &os.PathError{Op: "write", Path: "/dev/full", Err: syscall.EDQUOT}),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.bucket("bkt")
			e.fake.Fail(gatewaytest.OpPut, err)
			_, perr := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("body")})
			wantErr(t, perr, "InsufficientStorage", 507)
			var ae smithy.APIError
			errors.As(perr, &ae)
			msg := ae.ErrorMessage()
			if strings.Contains(msg, "/dev/full") || strings.Contains(msg, "posix:") {
				t.Errorf("the 507 message shows the server's path or error chain: %q", msg)
			}
			var errno syscall.Errno
			errors.As(err, &errno)
			if !strings.Contains(msg, errno.Error()) {
				t.Errorf("the 507 message %q does not say %q", msg, errno.Error())
			}
		})
	}
}
