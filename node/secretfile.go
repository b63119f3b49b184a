package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// secretRecheck is how often a secret file is looked at again: a rotated
// credential is in use at most this long after the file changed.
var secretRecheck = 10 * time.Second

// secretFile is a secret kept in a file the policy names (a mounted
// Kubernetes secret, a Vault agent's output). It is read again when the
// file changes (its modification time or size; a Kubernetes secret
// volume swaps a symlink, which Stat follows), so a rotated credential is
// used without a restart. A file that cannot be read after it was read
// once keeps its last value (a rotation in progress) and says so in the
// log once.
type secretFile struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	val     string
	mod     time.Time
	size    int64
	checked time.Time
}

func newSecretFile(path string) *secretFile { return &secretFile{path: path, now: time.Now} }

// secret is a credential's value: from a file read again when it
// changes, or fixed (from the environment when the store was opened).
type secret interface{ get() (string, error) }

// fixedSecret is a value read once ("" when not set).
type fixedSecret string

func (s fixedSecret) get() (string, error) { return string(s), nil }

// get returns the secret, reading the file when it may have changed.
func (f *secretFile) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.val != "" && now.Sub(f.checked) < secretRecheck {
		return f.val, nil
	}
	f.checked = now
	fi, err := os.Stat(f.path)
	if err == nil && f.val != "" && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.val, nil
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(f.path)
	}
	v := strings.TrimSpace(string(data))
	if err == nil && v == "" {
		err = fmt.Errorf("it is empty")
	}
	if err != nil {
		err = fmt.Errorf("credentials file %s (named in the policy): %w", f.path, err)
		if f.val != "" {
			return f.val, nil // keep the last good value while the file is being replaced
		}
		return "", err
	}
	f.val, f.mod, f.size = v, fi.ModTime(), fi.Size()
	return v, nil
}

// fileCredentials is an S3 credentials provider over secret files (the
// access key and secret key, and a session token when named). The
// credentials it returns expire after secretRecheck, so the SDK asks again
// and a rotated file is used.
type fileCredentials struct{ ak, sk, tok secret }

func (c fileCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	ak, err := c.ak.get()
	if err != nil {
		return aws.Credentials{}, err
	}
	sk, err := c.sk.get()
	if err != nil {
		return aws.Credentials{}, err
	}
	tok, err := c.tok.get()
	if err != nil {
		return aws.Credentials{}, err
	}
	return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, SessionToken: tok, Source: "fedgate policy credential files",
		CanExpire: true, Expires: time.Now().Add(secretRecheck)}, nil
}
