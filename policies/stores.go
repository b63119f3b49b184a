package policies

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// names tracks declared names to report duplicates.
type names map[string]pos

// add records a name; it reports a duplicate and returns false.
func (d *decoder) addName(seen names, name string, p pos, pth, what string) bool {
	if first, dup := seen[name]; dup {
		d.errorf(p, pth, "duplicate %s name %s (first declared at %d:%d)", what, quote(name), first.line, first.col)
		return false
	}
	seen[name] = p
	return true
}

// name reads the required name key of a list item. ok is false if the name
// is missing or invalid (reported).
func (d *decoder) name(m map[string]entry, p pos, pth, what string, valid func(string) error) (string, pos, bool) {
	e, ok := m["name"]
	if !ok {
		d.errorf(p, join(pth, "name"), "missing required key (the %s's name)", what)
		return "", pos{}, false
	}
	s, ok := d.str(e, join(pth, "name"), "a "+what+" name")
	if !ok {
		return "", pos{}, false
	}
	if err := valid(s); err != nil {
		d.errorf(e.vpos, join(pth, "name"), "%v", err)
		return s, e.vpos, false // kept so that uses of it are not reported too
	}
	return s, e.vpos, true
}

// location reads a required cloud:region key.
func (d *decoder) location(m map[string]entry, p pos, pth string) (Location, pos, bool) {
	e, ok := m["location"]
	if !ok {
		d.errorf(p, join(pth, "location"), "missing required key (expected cloud:region, cloud one of %s)", strings.Join(Clouds, ", "))
		return Location{}, pos{}, false
	}
	s, ok := d.str(e, join(pth, "location"), "a location like aws:us-east-1")
	if !ok {
		return Location{}, pos{}, false
	}
	l, err := ParseLocation(s)
	if err != nil {
		d.errorf(e.vpos, join(pth, "location"), "%v", err)
		return Location{}, pos{}, false
	}
	return l, e.vpos, true
}

var regionKeys = []string{"name", "location", "endpoint", "catalog"}

func (d *decoder) regions(e entry) []Region {
	items, _ := d.list(e.val, e.vpos, "regions", "regions")
	var out []Region
	type peerKeys struct {
		p                 pos
		endpoint, catalog bool
	}
	var peers []peerKeys
	seen := names{}
	for i, item := range items {
		pth := index("regions", i)
		n, p := d.value(item, e.vpos, pth)
		m, ok := d.fields(n, p, pth, regionKeys)
		if !ok {
			continue
		}
		var r Region
		var npos pos
		r.Name, npos, ok = d.name(m, p, pth, "region", validName)
		if ok {
			d.addName(seen, r.Name, npos, join(pth, "name"), "region")
		}
		r.Location, _, _ = d.location(m, p, pth)
		_, hasE := m["endpoint"]
		_, hasC := m["catalog"]
		peers = append(peers, peerKeys{p, hasE, hasC})
		if e, ok := m["endpoint"]; ok {
			if v, ok := d.str(e, join(pth, "endpoint"), "a URL"); ok {
				if err := endpointURL(v); err != nil {
					d.errorf(e.vpos, join(pth, "endpoint"), "%v", err)
				} else {
					r.Endpoint = strings.TrimSuffix(v, "/")
				}
			}
		}
		if e, ok := m["catalog"]; ok {
			if v, ok := d.str(e, join(pth, "catalog"), "host:port"); ok {
				if err := hostPort(v); err != nil {
					d.errorf(e.vpos, join(pth, "catalog"), "%v", err)
				} else {
					r.Catalog = v
				}
			}
		}
		out = append(out, r)
	}
	// A catalog has one voter per region: once one region names its
	// voter, every region must, with the endpoint peers reach it by.
	if slices.ContainsFunc(peers, func(k peerKeys) bool { return k.catalog }) {
		for i, k := range peers {
			for _, c := range []struct {
				key string
				has bool
			}{{"endpoint", k.endpoint}, {"catalog", k.catalog}} {
				if !c.has {
					d.errorf(k.p, join(index("regions", i), c.key), "missing required key (the regions peer through a global catalog: every region needs endpoint and catalog)")
				}
			}
		}
	}
	return out
}

// hostPort checks a catalog address.
func hostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("invalid address %s: expected host:port of a node's --catalog-addr, like 10.0.0.5:7500", quote(s))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("invalid port in %s: expected 1 to 65535", quote(s))
	}
	return nil
}

var peeringKeys = []string{"credentials", "ca_file", "cert_file", "key_file"}

// peering reads how regions reach each other.
func (d *decoder) peering(e entry) Peering {
	var pr Peering
	n, p := d.value(e.val, e.vpos, "peering")
	m, ok := d.fields(n, p, "peering", peeringKeys)
	if !ok {
		return pr
	}
	if c, ok := m["credentials"]; ok {
		pr.Credentials = d.credentials(c, "peering.credentials", peerCredentials)
	}
	file := func(key string) string {
		f, ok := m[key]
		if !ok {
			return ""
		}
		v, ok := d.str(f, join("peering", key), "a file path")
		if ok && !filepath.IsAbs(v) {
			d.errorf(f.vpos, join("peering", key), "expected an absolute file path, got %q", v)
		}
		return v
	}
	pr.CAFile, pr.CertFile, pr.KeyFile = file("ca_file"), file("cert_file"), file("key_file")
	if (pr.CertFile == "") != (pr.KeyFile == "") {
		d.errorf(p, "peering", "cert_file and key_file go together (this region's certificate for the catalog's mutual TLS)")
	}
	if pr.CertFile != "" && pr.CAFile == "" {
		d.errorf(p, "peering.ca_file", "missing required key (cert_file and key_file need the CA that signed every region's certificate)")
	}
	return pr
}

var storeKeys = []string{"name", "kind", "location", "bucket", "container", "account", "path", "read_only", "endpoint", "path_style", "credentials"}

// kindKeys are the keys each store kind takes, besides name, kind and
// location; the first ones listed are required.
var kindKeys = map[StoreKind]struct{ required, optional []string }{
	KindS3:    {[]string{"bucket"}, []string{"endpoint", "path_style", "credentials"}},
	KindGCS:   {[]string{"bucket"}, []string{"endpoint", "credentials"}},
	KindAzure: {[]string{"account", "container"}, []string{"endpoint", "credentials"}},
	KindPosix: {[]string{"path"}, nil},
	KindFS:    {[]string{"path"}, []string{"read_only"}},
}

// peerCredentials is the credentials of peering: (not a store kind).
const peerCredentials StoreKind = "peering"

var credentialKeys = map[StoreKind][]string{
	peerCredentials: {"access_key_env", "secret_key_env", "access_key_file", "secret_key_file"},
	KindS3:          {"access_key_env", "secret_key_env", "session_token_env", "access_key_file", "secret_key_file", "session_token_file", "file", "profile"},
	KindGCS:         {"file"},
	KindAzure:       {"account_key_env", "account_key_file", "sas_token_env"},
}

var allCredentialKeys = []string{"access_key_env", "secret_key_env", "session_token_env", "access_key_file", "secret_key_file", "session_token_file",
	"account_key_env", "account_key_file", "sas_token_env", "file", "profile"}

var (
	azureAccount   = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	azureContainer = regexp.MustCompile(`^[a-z0-9](-?[a-z0-9]){2,62}$`)
)

func (d *decoder) stores(e entry) []Store {
	items, _ := d.list(e.val, e.vpos, "stores", "stores")
	var out []Store
	seen := names{}
	for i, item := range items {
		pth := index("stores", i)
		n, p := d.value(item, e.vpos, pth)
		m, ok := d.fields(n, p, pth, storeKeys)
		if !ok {
			continue
		}
		var s Store
		var npos pos
		if s.Name, npos, ok = d.name(m, p, pth, "store", validName); ok {
			d.addName(seen, s.Name, npos, join(pth, "name"), "store")
		}
		s.Location, _, _ = d.location(m, p, pth)
		s.Kind = d.storeKind(m, p, pth)
		if s.Kind != "" {
			d.storeDetails(m, p, pth, &s)
		}
		out = append(out, s)
	}
	return out
}

func (d *decoder) storeKind(m map[string]entry, p pos, pth string) StoreKind {
	kinds := make([]string, len(StoreKinds))
	for i, k := range StoreKinds {
		kinds[i] = string(k)
	}
	e, ok := m["kind"]
	if !ok {
		d.errorf(p, join(pth, "kind"), "missing required key %s", oneOf(kinds))
		return ""
	}
	k, ok := d.enum(e, join(pth, "kind"), "store kind", kinds)
	if !ok {
		return ""
	}
	if !d.feat.StoreKinds[StoreKind(k)] {
		d.unsupported(e.vpos, join(pth, "kind"), "store kind "+quote(k), d.feat.storeKindNames())
	}
	return StoreKind(k)
}

// storeDetails reads the keys that depend on the store's kind.
func (d *decoder) storeDetails(m map[string]entry, p pos, pth string, s *Store) {
	kk := kindKeys[s.Kind]
	takes := append(append([]string{"name", "kind", "location"}, kk.required...), kk.optional...)
	for _, key := range storeKeys {
		if e, ok := m[key]; ok && !slices.Contains(takes, key) {
			d.errorf(e.kpos, join(pth, key), "key %q does not apply to a %s store (it takes %s)", key, s.Kind, strings.Join(takes, ", "))
		}
	}
	for _, key := range kk.required {
		if _, ok := m[key]; !ok {
			d.errorf(p, join(pth, key), "missing required key (a %s store needs %s)", s.Kind, strings.Join(kk.required, " and "))
		}
	}
	want := map[StoreKind]string{KindGCS: "gcp", KindAzure: "azure"}[s.Kind]
	if e, ok := m["location"]; ok && want != "" && s.Location.Cloud != "" && s.Location.Cloud != want {
		d.errorf(e.vpos, join(pth, "location"), "a %s store is in the %s cloud (expected %s:REGION, got %s)", s.Kind, want, want, s.Location)
	}
	str := func(key, what string, check func(string) error) string {
		e, ok := m[key]
		if !ok || !slices.Contains(takes, key) {
			return ""
		}
		v, ok := d.str(e, join(pth, key), what)
		if !ok {
			return ""
		}
		if err := check(v); err != nil {
			d.errorf(e.vpos, join(pth, key), "%v", err)
			return ""
		}
		return v
	}
	s.Bucket = str("bucket", "a bucket name", cloudBucket)
	s.Account = str("account", "an Azure storage account name", matching(azureAccount, "an Azure storage account name: 3 to 24 lowercase letters and digits"))
	s.Container = str("container", "an Azure container name", matching(azureContainer, "an Azure container name: 3 to 63 lowercase letters, digits and single '-', starting and ending with a letter or digit"))
	s.Path = str("path", "an absolute directory path", posixPath)
	if s.Path != "" {
		s.Path = path.Clean(s.Path)
	}
	s.Endpoint = str("endpoint", "a URL", endpointURL)
	if e, ok := m["read_only"]; ok && slices.Contains(takes, "read_only") {
		s.ReadOnly, _ = d.boolean(e, join(pth, "read_only"))
	}
	if e, ok := m["path_style"]; ok && slices.Contains(takes, "path_style") {
		s.PathStyle, _ = d.boolean(e, join(pth, "path_style"))
	}
	if e, ok := m["credentials"]; ok && slices.Contains(takes, "credentials") {
		s.Credentials = d.credentials(e, join(pth, "credentials"), s.Kind)
	}
}

func matching(re *regexp.Regexp, want string) func(string) error {
	return func(s string) error {
		if !re.MatchString(s) {
			return fmt.Errorf("invalid name %s: expected %s", quote(s), want)
		}
		return nil
	}
}

func cloudBucket(s string) error {
	if s == "" || strings.ContainsAny(s, "/ \t\n") || len(s) > 222 {
		return fmt.Errorf("invalid bucket %s: expected the cloud bucket's name, without '/' or spaces", quote(s))
	}
	return nil
}

func posixPath(s string) error {
	if !strings.HasPrefix(s, "/") || strings.ContainsRune(s, 0) {
		return fmt.Errorf("invalid path %s: expected an absolute directory path like /mnt/nas/fedgate", quote(s))
	}
	return nil
}

// endpointURL checks an endpoint; its messages never repeat the URL, which
// may hold a password.
func endpointURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("invalid endpoint: expected an http:// or https:// URL with a host")
	case u.User != nil:
		return fmt.Errorf("invalid endpoint: user or password in the URL; use credentials instead")
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("invalid endpoint: expected no query or fragment")
	}
	return nil
}

// credentials reads where a store's secrets come from.
func (d *decoder) credentials(e entry, pth string, kind StoreKind) Credentials {
	allowed := credentialKeys[kind]
	m, ok := d.fields(e.val, e.vpos, pth, allowed)
	if !ok {
		return Credentials{}
	}
	var c Credentials
	env := func(key string) string {
		e, ok := m[key]
		if !ok {
			return ""
		}
		if !isScalar(e.val) {
			d.errorf(e.vpos, join(pth, key), "expected an environment variable name, got %s", describe(e.val))
			return ""
		}
		if err := validEnv(scalarText(e.val)); err != nil {
			d.errorf(e.vpos, join(pth, key), "%v", err)
			return ""
		}
		return scalarText(e.val)
	}
	c.AccessKeyEnv, c.SecretKeyEnv, c.SessionTokenEnv = env("access_key_env"), env("secret_key_env"), env("session_token_env")
	c.AccountKeyEnv, c.SASTokenEnv = env("account_key_env"), env("sas_token_env")
	if e, ok := m["file"]; ok {
		if v, ok := d.str(e, join(pth, "file"), "a file path"); ok {
			c.File = v
			if v == "" {
				d.errorf(e.vpos, join(pth, "file"), "expected a file path, got an empty string")
			}
		}
	}
	if e, ok := m["profile"]; ok {
		c.Profile, _ = d.str(e, join(pth, "profile"), "a profile name")
	}
	path := func(key string) string {
		e, ok := m[key]
		if !ok {
			return ""
		}
		v, ok := d.str(e, join(pth, key), "a file path")
		if ok && !filepath.IsAbs(v) {
			d.errorf(e.vpos, join(pth, key), "expected an absolute file path, got %q", v)
		}
		return v
	}
	c.AccessKeyFile, c.SecretKeyFile, c.SessionTokenFile = path("access_key_file"), path("secret_key_file"), path("session_token_file")
	c.AccountKeyFile = path("account_key_file")
	has := func(k string) bool { _, ok := m[k]; return ok }
	for _, secret := range []string{"access_key", "secret_key", "session_token", "account_key"} {
		if has(secret+"_env") && has(secret+"_file") {
			d.errorf(m[secret+"_file"].kpos, join(pth, secret+"_file"), "set either %s_env or %s_file, not both", secret, secret)
		}
	}
	hasKey := has("access_key_env") || has("access_key_file")
	switch {
	case hasKey != (has("secret_key_env") || has("secret_key_file")):
		d.errorf(e.vpos, pth, "access_key_env and secret_key_env go together (or their _file forms); set both or neither")
	case (has("session_token_env") || has("session_token_file")) && !hasKey:
		d.errorf(e.vpos, pth, "a session token needs the access key and the secret key")
	case has("file") && hasKey:
		d.errorf(m["file"].kpos, join(pth, "file"), "set either file or the access key and secret key, not both")
	case (has("account_key_env") || has("account_key_file")) && has("sas_token_env"):
		d.errorf(m["sas_token_env"].kpos, join(pth, "sas_token_env"), "set either the account key or sas_token_env, not both")
	case has("profile") && !has("file"):
		d.errorf(m["profile"].kpos, join(pth, "profile"), "needs file (the shared credentials file the profile is in)")
	case has("account_key_env") && has("sas_token_env"):
		d.errorf(m["sas_token_env"].kpos, join(pth, "sas_token_env"), "set either account_key_env or sas_token_env, not both")
	}
	return c
}
