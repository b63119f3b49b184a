package policies

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// checkErrors asserts that err is an ErrorList holding exactly the wanted
// errors, in order. Each want is "LINE:COL TEXT" where TEXT must appear in
// "path: msg".
func checkErrors(t *testing.T, err error, wants []string) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error = %v (%T), want an ErrorList", err, err)
	}
	var got []string
	for _, e := range list {
		got = append(got, fmt.Sprintf("%d:%d %s: %s", e.Line, e.Column, e.Path, e.Msg))
	}
	ok := len(list) == len(wants)
	for i := 0; ok && i < len(wants); i++ {
		at, text, _ := strings.Cut(wants[i], " ")
		e := list[i]
		ok = fmt.Sprintf("%d:%d", e.Line, e.Column) == at && strings.Contains(e.Path+": "+e.Msg, text) && e.File == "policy.yaml"
	}
	if !ok {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wants, "\n  "))
	}
}

const storesPrefix = `stores:
  - {name: nas, kind: posix, location: onprem:lga1, path: /mnt/nas}
  - {name: ckpt-gcs, kind: gcs, location: gcp:us-central1, bucket: acme}
`

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown store kind", "stores:\n  - name: a\n    kind: s4\n    location: aws:us-east-1\n",
			[]string{`3:11 stores[0].kind: unknown store kind "s4" (expected one of s3, gcs, azure, posix, fs; did you mean "s3"?)`}},
		{"read_only on a posix store", "stores:\n  - {name: a, kind: posix, location: onprem:x, path: /a, read_only: true}\n",
			[]string{`2:58 stores[0].read_only: key "read_only" does not apply to a posix store (it takes name, kind, location, path)`}},
		{"fs store read_only not a boolean", "stores:\n  - {name: a, kind: fs, location: onprem:x, path: /a, read_only: maybe}\n",
			[]string{`2:66 stores[0].read_only: expected true or false, got the string "maybe"`}},
		{"read_only store as the default", "stores:\n  - {name: ro, kind: fs, location: onprem:x, path: /a, read_only: true}\ndefaults: {store: ro}\n",
			[]string{`3:19 defaults.store: store "ro" is read_only: it takes no writes, so it can be a bucket's origin but not the default store`}},
		{"read_only store in a placement", "stores:\n  - {name: ro, kind: fs, location: onprem:x, path: /a, read_only: true}\nbuckets:\n  - {name: data, placement: {single: ro}}\n",
			[]string{`4:38 buckets[0].placement.single: store "ro" is read_only: it takes no writes, so it can be a bucket's origin but not in a placement`}},
		{"fs store without a path", "stores:\n  - {name: a, kind: fs, location: onprem:x}\n",
			[]string{`2:5 stores[0].path: missing required key (a fs store needs path)`}},
		{"unknown key did you mean", "stores:\n  - name: a\n    kind: s3\n    location: aws:us-east-1\n    bukcet: x\n",
			[]string{`2:5 stores[0].bucket: missing required key (a s3 store needs bucket)`, `5:5 stores[0].bukcet: unknown key "bukcet" (did you mean "bucket"?)`}},
		{"unknown top-level key", "regions: []\nflavour: vanilla\n",
			[]string{`2:1 flavour: unknown key "flavour" (expected one of regions, peering, stores, buckets, routing, egress, defaults)`}},
		{"peered region without endpoint", "regions:\n  - {name: a, location: onprem:x, endpoint: http://a:9000, catalog: a:7500}\n  - {name: b, location: onprem:y}\n",
			[]string{`3:5 regions[1].endpoint: missing required key (the regions peer through a global catalog`, `3:5 regions[1].catalog: missing required key`}},
		{"region endpoint not a URL", "regions:\n  - {name: a, location: onprem:x, endpoint: ftp://a}\n",
			[]string{`2:45 regions[0].endpoint: invalid endpoint: expected an http:// or https:// URL with a host`}},
		{"catalog address without a port", "regions:\n  - {name: a, location: onprem:x, endpoint: http://a:9000, catalog: a}\n",
			[]string{`2:69 regions[0].catalog: invalid address "a": expected host:port of a node's --catalog-addr`}},
		{"peering certificate without its key and CA", "regions: []\npeering:\n  cert_file: /etc/fedgate/region.pem\n",
			[]string{`3:3 peering: cert_file and key_file go together`, `3:3 peering.ca_file: missing required key`}},
		{"peering secret inline", "regions: []\npeering:\n  credentials: {access_key_env: AK, secret_key: s3cr3t}\n",
			[]string{`3:16 peering.credentials: access_key_env and secret_key_env go together`, `3:37 peering.credentials.secret_key: secrets are never written in the policy file`}},
		{"top-level typo", "bucket: []\n", []string{`1:1 bucket: unknown key "bucket" (did you mean "buckets"?)`}},
		{"duplicate store", storesPrefix + "  - {name: nas, kind: posix, location: onprem:lga1, path: /x}\n",
			[]string{`4:12 stores[2].name: duplicate store name "nas" (first declared at 2:12)`}},
		{"duplicate bucket", "buckets:\n  - name: data\n  - name: data\n",
			[]string{`3:11 buckets[1].name: duplicate bucket name "data" (first declared at 2:11)`}},
		{"duplicate region", "regions:\n  - {name: r, location: aws:us-east-1}\n  - {name: r, location: aws:us-east-2}\n",
			[]string{`3:12 regions[1].name: duplicate region name "r" (first declared at 2:12)`}},
		{"unknown store with suggestion", storesPrefix + "buckets:\n  - {name: data, placement: {single: ckpt-gsc}}\n",
			[]string{`5:38 buckets[0].placement.single: unknown store "ckpt-gsc" (did you mean "ckpt-gcs"?)`}},
		{"unknown store none declared", "buckets:\n  - {name: data, placement: {single: nas}}\n",
			[]string{`2:38 buckets[0].placement.single: unknown store "nas" (no stores are declared)`}},
		{"unknown store listing", storesPrefix + "defaults: {store: elsewhere}\n",
			[]string{`4:19 defaults.store: unknown store "elsewhere" (expected one of nas, ckpt-gcs)`}},
		{"origin unknown store", storesPrefix + "buckets:\n  - name: data\n    origin: datasets/imagenet/\n",
			[]string{`6:13 buckets[0].origin: unknown store "datasets"`}},
		{"origin prefix slash", storesPrefix + "buckets:\n  - name: data\n    origin: nas/imagenet\n",
			[]string{`6:13 buckets[0].origin: origin prefix must end with '/' (did you mean "nas/imagenet/"?)`}},
		{"budget unknown bucket", "buckets: [{name: data}]\negress:\n  budgets:\n    - {bucket: dta, monthly: 5USD}\n",
			[]string{`4:16 egress.budgets[0].bucket: unknown bucket "dta" (did you mean "data"?)`}},
		{"budget twice", "buckets: [{name: data}]\negress:\n  budgets:\n    - {bucket: data, monthly: 5USD}\n    - {bucket: data, monthly: 6USD}\n",
			[]string{`5:16 egress.budgets[1].bucket: bucket "data" already has a budget (at 4:16)`}},
		{"budget money", "buckets: [{name: data}]\negress:\n  budgets:\n    - {bucket: data, monthly: 500}\n    - {bucket: data2, monthly: 5EUR, action: shout}\n    - {monthly: 0USD}\n",
			[]string{
				`4:31 egress.budgets[0].monthly: amount "500" has no currency: expected like 500USD`,
				`5:16 egress.budgets[1].bucket: unknown bucket "data2"`,
				`5:32 egress.budgets[1].monthly: unknown currency "EUR" in "5EUR" (expected USD)`,
				`5:46 egress.budgets[1].action: unknown budget action "shout" (expected one of alert, block-cold-reads)`,
				`6:7 egress.budgets[2]: a budget needs "bucket", a region pair`,
				`6:17 egress.budgets[2].monthly: expected an amount above zero, got 0USD`,
			}},
		{"budget region pair", "buckets: [{name: data}]\negress:\n  budgets:\n    - {from: aws, to: gpc, monthly: 5USD}\n    - {from: aws:us-east-1, monthly: 5USD}\n    - {monthly: 6USD, from: aws:us-east-1}\n",
			[]string{
				`4:23 egress.budgets[0].to: unknown cloud "gpc" in location "gpc" (expected one of aws, gcp, azure, onprem)`,
				`6:7 egress.budgets[2]: region pair aws:us-east-1 -> * already has a budget (at 5:7)`,
			}},
		{"cache priority", "buckets:\n  - {name: data, cache: {priority: urgent}}\n",
			[]string{`2:36 buckets[0].cache.priority: unknown cache priority "urgent" (expected one of low, normal, high)`}},
		{"bucket names", "buckets:\n  - name: Data\n  - name: ab\n  - name: 10.0.0.1\n  - name: _fedgate\n  - name: xn--abc\n",
			[]string{
				`2:11 buckets[0].name: bucket name "Data" may contain only lowercase letters, digits, '.' and '-' (found 'D' at offset 0)`,
				`3:11 buckets[1].name: bucket name "ab" must be 3 to 63 characters long (it has 2)`,
				`4:11 buckets[2].name: bucket name "10.0.0.1" must not be formatted as an IP address`,
				`5:11 buckets[3].name: bucket name "_fedgate" may contain only`,
				`6:11 buckets[4].name: bucket name "xn--abc" must not start with "xn--"`,
			}},
		{"erasure bounds", storesPrefix + "buckets:\n  - name: aaa\n    placement: {erasure: {data: 1, parity: 0, stores: [nas, ckpt-gcs]}}\n  - name: bbb\n    placement:\n      erasure: {data: 4, parity: 2, stores: [nas, ckpt-gcs]}\n",
			[]string{
				`6:33 buckets[0].placement.erasure.data: expected at least 2 data shards, got 1 (with 1, use replicate)`,
				`6:44 buckets[0].placement.erasure.parity: expected 1 to 256 parity shards, got 0`,
				`9:45 buckets[1].placement.erasure.stores: 6 shards over 2 stores puts up to 3 shards on one store, more than parity 2: losing one store would lose data (expected at least 3 stores`,
			}},
		{"erasure missing and extra", storesPrefix + "buckets:\n  - name: aaa\n    placement:\n      erasure: {data: 2, parity: 1, stores: [nas, ckpt-gcs, nas2, nas3], shards: 3}\n  - name: bbb\n    placement: {erasure: {data: x}}\n",
			[]string{
				`7:45 buckets[0].placement.erasure.stores: 4 stores for 2+1 = 3 shards: expected at most one store per shard`,
				`7:61 buckets[0].placement.erasure.stores[2]: unknown store "nas2" (did you mean "nas"?)`,
				`7:67 buckets[0].placement.erasure.stores[3]: unknown store "nas3"`,
				`7:74 buckets[0].placement.erasure.shards: unknown key "shards" (expected one of data, parity, stores)`,
				`9:26 buckets[1].placement.erasure.parity: missing required key (erasure needs data, parity and stores)`,
				`9:26 buckets[1].placement.erasure.stores: missing required key`,
				`9:33 buckets[1].placement.erasure.data: expected a whole number, got the string "x"`,
			}},
		{"replicate and placement shape", storesPrefix + "buckets:\n  - {name: aaa, placement: {replicate: [nas, nas]}}\n  - {name: bbb, placement: {single: nas, replicate: [nas, ckpt-gcs]}}\n  - {name: ccc, placement: {}}\n  - {name: ddd, placement: {single: nas}, origin: nas/}\n",
			[]string{
				`5:40 buckets[0].placement.replicate: replicate needs at least 2 stores, got 1 (for one store use single)`,
				`5:46 buckets[0].placement.replicate[1]: store "nas" is listed twice (first at 5:41)`,
				`6:42 buckets[1].placement.replicate: a placement is one of single, replicate or erasure; single is already set`,
				`7:28 buckets[2].placement: expected one of single, replicate or erasure`,
				`8:17 buckets[3].placement: a bucket with an origin (line 8) keeps its objects in the origin store; remove placement or origin`,
			}},
		{"bucket routing", storesPrefix + "buckets:\n  - {name: aaa, placement: {replicate: [nas, ckpt-gcs]}, routing: [ckpt-gcs, ckpt-gcs]}\n  - {name: bbb, placement: {single: nas}, routing: [nas]}\n  - {name: ccc, placement: {replicate: [nas, ckpt-gcs]}, routing: cheapst}\n  - {name: ddd, placement: {replicate: [nas, ckpt-gcs]}, routing: [other]}\n",
			[]string{
				`5:78 buckets[0].routing[1]: store "ckpt-gcs" is listed twice`,
				`6:53 buckets[1].routing[0]: an explicit read order needs a replicate or erasure placement (this bucket has single placement)`,
				`7:67 buckets[2].routing: unknown routing rule "cheapst" (expected one of cheapest, nearest; did you mean "cheapest"?)`,
				`8:68 buckets[3].routing[0]: store "other" is not in the bucket's placement (expected one of nas, ckpt-gcs)`,
			}},
		{"bucket globs", storesPrefix + "buckets:\n  - {name: \"ckpt-[ab]*\"}\n  - {name: \"data-*\", origin: nas/}\n  - {name: \"Run_*\"}\n",
			[]string{
				`5:12 buckets[0].name: bucket name glob "ckpt-[ab]*": only * and ? are wildcards`,
				`6:22 buckets[1].origin: a bucket name glob gives rules to buckets created through S3; it cannot mount an origin`,
				`7:12 buckets[2].name: bucket name glob "Run_*" may contain only lowercase letters, digits, '.', '-', '*' and '?' (found 'R' at offset 0)`,
			}},
		{"write and cache values", "buckets:\n  - name: aaa\n    write: write-behind\n    cache: {ttl: -5m, quota: 2TIB, pin: yes, prefetch: all}\n  - name: bbb\n    cache: {ttl: 30, quota: -1}\n",
			[]string{
				`3:12 buckets[0].write: unknown write mode "write-behind" (expected one of write-through, write-back)`,
				`4:18 buckets[0].cache.ttl: invalid duration "-5m": must not be negative`,
				`4:30 buckets[0].cache.quota: unknown size unit "TIB" in "2TIB" (did you mean "TiB"?)`,
				`4:41 buckets[0].cache.pin: expected true or false, got the string "yes"`,
				`4:56 buckets[0].cache.prefetch: unknown prefetch mode "all" (expected one of none, sequential, on-apply)`,
				`6:18 buckets[1].cache.ttl: invalid duration "30": expected a duration like 30s, 15m, 24h or 7d`,
				`6:29 buckets[1].cache.quota: invalid size "-1"`,
			}},
		{"type errors", "regions: {name: r}\nstores:\n  - just-a-string\nbuckets:\n  - name: {a: 1}\n    cache: big\nrouting: [cheapest]\negress:\n  prices: [1]\n",
			[]string{
				`1:10 regions: expected a list of regions, got a mapping`,
				`3:5 stores[0]: expected a mapping with keys name, kind, location`,
				`5:11 buckets[0].name: expected a bucket name, got a mapping`,
				`6:12 buckets[0].cache: expected a mapping with keys ttl, quota, pin, prefetch, priority, got the string "big"`,
				`7:10 routing: expected a mapping with keys prefer, got a list`,
				`9:11 egress.prices: expected a mapping FROM: {TO: PRICE_PER_GB}`,
			}},
		{"locations", "regions:\n  - {name: a, location: aws}\n  - {name: b, location: amazon:us-east-1}\n  - {name: c, location: 'gcp:US Central'}\n  - {name: d}\nstores:\n  - {name: g, kind: gcs, location: aws:us-east-1, bucket: x}\n",
			[]string{
				`2:25 regions[0].location: location "aws" has no region: expected cloud:region like aws:REGION`,
				`3:25 regions[1].location: unknown cloud "amazon" in location "amazon:us-east-1" (expected one of aws, gcp, azure, onprem)`,
				`4:25 regions[2].location: invalid region "US Central" in location "gcp:US Central": use lowercase letters, digits,`,
				`5:5 regions[3].location: missing required key`,
				`7:36 stores[0].location: a gcs store is in the gcp cloud (expected gcp:REGION, got aws:us-east-1)`,
			}},
		{"store keys by kind", "stores:\n  - {name: p, kind: posix, location: onprem:x, path: rel/dir, bucket: b}\n  - {name: s, kind: s3, location: aws:us-east-1, endpoint: 'https://user:hunter2@minio:9000'}\n  - {name: z, kind: azure, location: azure:eastus, account: Acme_Ckpt, container: c}\n  - {kind: posix, location: onprem:x, path: /x}\n",
			[]string{
				`2:54 stores[0].path: invalid path "rel/dir": expected an absolute directory path like /mnt/nas/fedgate`,
				`2:63 stores[0].bucket: key "bucket" does not apply to a posix store (it takes name, kind, location, path)`,
				`3:5 stores[1].bucket: missing required key (a s3 store needs bucket)`,
				`3:60 stores[1].endpoint: invalid endpoint: user or password in the URL; use credentials instead`,
				`4:61 stores[2].account: invalid name "Acme_Ckpt": expected an Azure storage account name`,
				`4:83 stores[2].container: invalid name "c": expected an Azure container name`,
				`5:5 stores[3].name: missing required key (the store's name)`,
			}},
		{"credentials", "stores:\n  - name: s\n    kind: s3\n    location: aws:us-east-1\n    bucket: b\n    credentials:\n      access_key: AKIAEXAMPLE\n      secret_key_env: 'wJalr/K7MDENG+bPxRfiCY'\n  - name: g\n    kind: gcs\n    location: gcp:eu\n    bucket: b\n    credentials: {access_key_env: X, file: /etc/sa.json}\n",
			[]string{
				`7:7 stores[0].credentials.access_key: secrets are never written in the policy file; name an environment variable with access_key_env`,
				`7:7 stores[0].credentials: access_key_env and secret_key_env go together`,
				`8:23 stores[0].credentials.secret_key_env: expected the name of an environment variable`,
				`13:19 stores[1].credentials.access_key_env: unknown key "access_key_env" (expected one of file)`,
			}},
		{"credential files", "stores:\n  - name: s\n    kind: s3\n    location: aws:us-east-1\n    bucket: b\n    credentials: {access_key_env: AK, access_key_file: /run/secrets/ak, secret_key_file: secrets/sk}\n  - name: z\n    kind: azure\n    location: azure:eastus\n    account: acme\n    container: ckpt\n    credentials: {account_key_file: /run/secrets/azure, sas_token_env: SAS, secret_key_file: /x}\n",
			[]string{
				`6:39 stores[0].credentials.access_key_file: set either access_key_env or access_key_file, not both`,
				`6:90 stores[0].credentials.secret_key_file: expected an absolute file path, got "secrets/sk"`,
				`12:57 stores[1].credentials.sas_token_env: set either the account key or sas_token_env, not both`,
				`12:77 stores[1].credentials.secret_key_file: unknown key "secret_key_file" (expected one of account_key_env, account_key_file, sas_token_env)`,
			}},
		{"second document", "regions: []\n---\nstores: []\n", []string{`3:1 a policy file holds one YAML document; this is a second one`}},
		{"unknown alias", "buckets: [{name: aaa, cache: *missing}]\n", []string{`1:30 buckets[0].cache: unknown alias *missing (no anchor &missing before it)`}},
		{"merge cycle", "buckets: [&b {<<: *b, name: abc}]\n", []string{`1:14 buckets[0]: merge key (<<) includes the mapping that contains it`}},
		{"merge of a scalar", "buckets: [{<<: 5, name: abc}]\n", []string{`1:16 buckets[0]: merge key (<<) needs a mapping or a list of mappings, got the number 5`}},
		{"sorted across sections", "buckets:\n  - {name: aaa, placement: {single: zz}}\nstores:\n  - {name: s, kind: s5, location: aws:x, path: /p}\nregions:\n  - {name: R, location: aws:x}\n",
			[]string{
				`2:37 buckets[0].placement.single: unknown store "zz" (expected one of s)`,
				`4:21 stores[0].kind: unknown store kind "s5"`,
				`6:12 regions[0].name: invalid name "R": use 1 to 63 lowercase letters`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("policy.yaml", []byte(tt.src), AllFeatures())
			checkErrors(t, err, tt.want)
		})
	}
}

func TestMalformedYAMLHasPosition(t *testing.T) {
	tests := []struct{ src, want string }{
		{"regions:\n\t- name: a\n", `2:1 invalid YAML: found character '\t' that cannot start any token (indent with spaces, not tabs)`},
		{"stores:\n  - name: 'unterminated\n", `2:11 invalid YAML: could not find end character of single-quoted text`},
		{"buckets: [{name: a}\n", `1:10 invalid YAML: sequence end token ']' not found`},
		{"regions: []\nregions: []\n", `2:1 invalid YAML: mapping key "regions" already defined at [1:1]`},
	}
	for _, tt := range tests {
		_, err := Parse("policy.yaml", []byte(tt.src), AllFeatures())
		checkErrors(t, err, []string{tt.want})
	}
}

func TestErrorFormatting(t *testing.T) {
	_, err := Parse("policy.yaml", []byte("stores:\n  - {name: a, kind: s4, location: aws:x, bucket: b}\nbuckets: [{name: A}]\n"), AllFeatures())
	want := `policy.yaml:2:21: stores[0].kind: unknown store kind "s4" (expected one of s3, gcs, azure, posix, fs; did you mean "s3"?)` + "\n" +
		`policy.yaml:3:18: buckets[0].name: bucket name "A" must be 3 to 63 characters long (it has 1)`
	if err == nil || err.Error() != want {
		t.Errorf("Error() =\n%v\nwant\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Column != 21 || e.Path != "stores[0].kind" {
		t.Errorf("errors.As(*Error) = %+v", e)
	}
	whole := &Error{File: "policy.yaml", Msg: "cannot parse"}
	if whole.Error() != "policy.yaml: cannot parse" {
		t.Errorf("whole-file Error() = %q", whole.Error())
	}
}

func TestSecretsAreNotEchoed(t *testing.T) {
	src := "stores:\n  - {name: s, kind: s3, location: aws:x, bucket: b, endpoint: 'https://u:TOPSECRET@h', credentials: {access_key_env: 'TOPSECRET/+', secret_key_env: Y}}\n"
	_, err := Parse("policy.yaml", []byte(src), AllFeatures())
	if err == nil || strings.Contains(err.Error(), "TOPSECRET") {
		t.Errorf("error echoes a secret or is missing: %v", err)
	}
}
