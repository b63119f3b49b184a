package check

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const chartDir = "../fedgate"

// repoRoot is the fedgate repository (the main module) this module sits in.
var repoRoot = filepath.Join("..", "..", "..")

// objects is one rendering, decoded.
type objects struct {
	all   []Object
	notes string
}

// get returns the one object of kind (and name, when not ""); it fails the
// test when there is not exactly one.
func get[T any](t *testing.T, o objects, kind, name string) T {
	t.Helper()
	var found []T
	for _, x := range o.all {
		if x.Kind == kind && (name == "" || x.Name == name) {
			found = append(found, x.Obj.(T))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q, found %d", kind, name, len(found))
	}
	return found[0]
}

// count is how many objects of kind were rendered.
func (o objects) count(kind string) int {
	n := 0
	for _, x := range o.all {
		if x.Kind == kind {
			n++
		}
	}
	return n
}

// render renders the chart and decodes every manifest strictly; any error
// fails the test.
func render(t *testing.T, files []string, set map[string]any, c Cluster) objects {
	t.Helper()
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	docs, notes, err := Render(ch, files, set, c)
	if err != nil {
		t.Fatalf("render %v %v: %v", files, set, err)
	}
	var o objects
	o.notes = notes
	for _, k := range sortedKeys(docs) {
		obj, err := Decode(docs[k])
		if err != nil {
			t.Fatalf("%s: strict decoding: %v\n%s", k, err, docs[k])
		}
		o.all = append(o.all, obj)
	}
	return o
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	fedgateOnce sync.Once
	fedgatePath string
	fedgateErr  error
)

// fedgateBin is the fedgate binary the rendered arguments are checked
// with: $FEDGATE_BIN, else one built from the repository once.
func fedgateBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FEDGATE_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	fedgateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fedgate-chartcheck-")
		if err != nil {
			fedgateErr = err
			return
		}
		fedgatePath = filepath.Join(dir, "fedgate")
		cmd := exec.Command("go", "build", "-o", fedgatePath, "./cmd/fedgate")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fedgateErr = &buildError{err: err, out: string(out)}
		}
	})
	if fedgateErr != nil {
		t.Fatalf("building fedgate (or set FEDGATE_BIN): %v", fedgateErr)
	}
	return fedgatePath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// TestMain removes the fedgate binary it built.
func TestMain(m *testing.M) {
	code := m.Run()
	if fedgatePath != "" {
		os.RemoveAll(filepath.Dir(fedgatePath))
	}
	os.Exit(code)
}

// helmBin is the helm binary: the one scripts/deploytools.sh installs
// ($FEDGATE_TESTENV_CACHE/bin, default ~/.cache/fedgate-testenv/bin), else
// one on PATH. Missing, the test is skipped on a developer machine and
// fails when CI is set (internal/deploycheck's Tool does the same for tofu
// and tflint).
func helmBin(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("FEDGATE_TESTENV_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "fedgate-testenv")
	}
	if p := filepath.Join(cache, "bin", "helm"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	const hint = "scripts/deploytools.sh install helm"
	if os.Getenv("CI") != "" {
		t.Fatalf("helm is not installed (CI is set, so this fails instead of skipping; run %s)", hint)
	}
	t.Skipf("helm is not installed; install it with %s", hint)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// container returns the named container of a pod template.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func volume(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	v, ok := findVolume(spec, name)
	if !ok {
		t.Fatalf("no volume %q", name)
	}
	return v
}

func findVolume(spec corev1.PodSpec, name string) (corev1.Volume, bool) {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.Volume{}, false
}

func claimTemplate(sts *appsv1.StatefulSet, name string) bool {
	for _, c := range sts.Spec.VolumeClaimTemplates {
		if c.Name == name {
			return true
		}
	}
	return false
}

// argValue is the value of --name=V in args ("", false when absent).
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// writePKI writes a CA and a certificate it signed for names (tls.crt,
// tls.key, ca.crt) into dir, as cert-manager's Secrets hold them.
func writePKI(t *testing.T, dir string, names ...string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chart check CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "PRIVATE KEY", Bytes: keyDER}, "ca.crt": {Type: "CERTIFICATE", Bytes: caDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
