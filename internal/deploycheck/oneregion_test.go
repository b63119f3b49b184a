package deploycheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/fedgate/fedgate/internal/deploycheck"
)

var oneRegionDir = filepath.Join(tfDir, "examples", "one-region-aws")

// releaseURL is where a release's binary is downloaded from: the artifact
// names scripts/release.sh makes (scripts/test-release.sh checks them),
// attached to the GitHub release of the tag (docs/deploy.md).
func releaseURL(version, arch string) string {
	return "https://github.com/fedgate/fedgate/releases/download/" + version + "/fedgate_" + version + "_linux_" + arch
}

// TestOneRegionAWSExample follows examples/one-region-aws with its
// terraform.tfvars.example through region-aws into node-config, and checks
// that the nodes download the release binary the variables name (the
// artifact make release makes) with its sha256, that the policy is one
// `fedgate policy validate` accepts as served by this build, and that a
// rendered node's command line starts fedgate (it listens, waiting for
// its peers). The two-region example's checks (TestRenderedNodes, ...) run
// through the same helpers.
func TestOneRegionAWSExample(t *testing.T) {
	vars, err := deploycheck.ReadTFVars(filepath.Join(oneRegionDir, "terraform.tfvars.example"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploycheck.FollowRegion(oneRegionDir, vars, "aws")
	if err != nil {
		t.Fatal(err)
	}
	in := c.NodeConfig
	version := vars["fedgate_version"].AsString()
	bin := in["binary"]
	if got, want := bin.GetAttr("url"), releaseURL(version, "amd64"); !got.RawEquals(cty.StringVal(want)) {
		t.Errorf("binary url = %#v, want the release artifact %s", got, want)
	}
	if got := bin.GetAttr("sha256"); !got.RawEquals(vars["fedgate_sha256"]) {
		t.Errorf("binary sha256 = %#v, want fedgate_sha256", got)
	}
	if got := in["region"]; !got.RawEquals(cty.StringVal("us-east-1-gpu")) {
		t.Errorf("region = %#v", got)
	}
	if n := in["nodes"].LengthInt(); n != 3 {
		t.Errorf("%d nodes, want node_count's default 3", n)
	}

	// An arm64 instance type gets the arm64 binary; a mirror replaces the URL.
	for _, tc := range []struct {
		set  map[string]cty.Value
		want string
	}{
		{map[string]cty.Value{"fedgate_arch": cty.StringVal("arm64"), "instance_type": cty.StringVal("i8g.2xlarge")}, releaseURL(version, "arm64")},
		{map[string]cty.Value{"fedgate_download_url": cty.StringVal("https://mirror.example.com/fedgate")}, "https://mirror.example.com/fedgate"},
	} {
		v := map[string]cty.Value{}
		for k, x := range vars {
			v[k] = x
		}
		for k, x := range tc.set {
			v[k] = x
		}
		c, err := deploycheck.FollowRegion(oneRegionDir, v, "aws")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.NodeConfig["binary"].GetAttr("url"); !got.RawEquals(cty.StringVal(tc.want)) {
			t.Errorf("with %v: binary url = %#v, want %s", tc.set, got, tc.want)
		}
	}

	policy := in["policy"].AsString()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(fedgateBin, "policy", "validate", path).CombinedOutput(); err != nil {
		t.Fatalf("fedgate policy validate: %v\n%s\npolicy:\n%s", err, out, policy)
	}
	if !strings.Contains(policy, "bucket: acme-datasets") || !strings.Contains(policy, "bucket: acme-fedgate-ckpt-use1") {
		t.Errorf("the policy does not use the example's buckets:\n%s", policy)
	}

	r := newTestRegion(t, []string{"n1", "n2", "n3"})
	h := r.hosts[0]
	n := render(t, r.localInputs(t, in, h, ""), h)
	checkCommandLine(t, r, n, "us-east-1-gpu")
	checkUnit(t, n)
	checkCloudInit(t, n)
	n.install(t)
	checkFlagsParse(t, r, n)
}
