package node

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/fedgate/fedgate/policies"
	"github.com/fedgate/fedgate/store"
	"github.com/fedgate/fedgate/store/azure"
	fsstore "github.com/fedgate/fedgate/store/fs"
	"github.com/fedgate/fedgate/store/gcs"
	"github.com/fedgate/fedgate/store/posix"
	s3store "github.com/fedgate/fedgate/store/s3"
)

// openStores opens the policy's stores, or the embedded on-prem store. It
// returns the stores by name and the default store's name. Secrets named
// by environment variables (lookupEnv) are read here, once per opening of
// the store (a start, or a policy apply that changes the store); secrets
// in files the policy names are read again whenever the files change.
func openStores(ctx context.Context, dataDir string, p *policies.Policy, region string, lookupEnv func(string) (string, bool)) (map[string]store.Store, string, error) {
	stores := map[string]store.Store{}
	if p == nil || len(p.Stores) == 0 {
		st, err := embeddedStore(dataDir)
		if err != nil {
			return nil, "", err
		}
		stores[embeddedStoreName] = st
		return stores, embeddedStoreName, nil
	}
	for _, ps := range p.Stores {
		if !reachable(p, region, ps) {
			continue
		}
		st, err := openStore(ctx, ps, lookupEnv)
		if err != nil {
			return nil, "", fmt.Errorf("store %q (%s): %w", ps.Name, ps.Kind, err)
		}
		stores[ps.Name] = st
	}
	def := defaultStore(p, region)
	if _, ok := stores[def]; !ok {
		st, err := embeddedStore(dataDir)
		if err != nil {
			return nil, "", err
		}
		stores[def] = st
	}
	return stores, def, nil
}

// embeddedStoreName is the region's own posix store under its data dir:
// the default store of a policy that names no store fit for it.
const embeddedStoreName = "local"

func embeddedStore(dataDir string) (store.Store, error) {
	return posix.New(embeddedStoreName, policies.Location{Cloud: "onprem", Region: "local"}, filepath.Join(dataDir, "store"))
}

// defaultStore names the region's default store (where S3-created buckets
// and the region's marker go): defaults.store, else the first declared
// store that is not an fs store (an fs store is a tree of the user's, into
// which fedgate writes only what clients write), else the embedded store.
func defaultStore(p *policies.Policy, region string) string {
	if def, ok := p.DefaultStore(); ok && reachable(p, region, def) {
		return def.Name
	}
	for _, s := range p.Stores {
		if s.Kind != policies.KindFS && reachable(p, region, s) {
			return s.Name
		}
	}
	return embeddedStoreName
}

// reachable reports whether a region's nodes open a store. In a policy
// that peers regions, a posix or fs store is a path on the machines of the
// regions at its location: other regions do not open it (their own disks
// would answer for it) and reach its buckets through a region there
// (docs/regions.md). Cloud stores are reachable from everywhere.
func reachable(p *policies.Policy, region string, ps policies.Store) bool {
	if p == nil || !p.Peered() || (ps.Kind != policies.KindPosix && ps.Kind != policies.KindFS) {
		return true
	}
	r, err := p.Region(region)
	return err != nil || r.Location == ps.Location
}

// env reads a variable the policy names; an unset one is an error that
// names the variable (never a value).
func env(lookup func(string) (string, bool), name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v, ok := lookup(name)
	if !ok || v == "" {
		return "", fmt.Errorf("environment variable %s (named in the policy's credentials) is not set", name)
	}
	return v, nil
}

func openStore(ctx context.Context, ps policies.Store, lookupEnv func(string) (string, bool)) (store.Store, error) {
	loc := policies.Location{Cloud: ps.Location.Cloud, Region: ps.Location.Region}
	c := ps.Credentials
	switch ps.Kind {
	case policies.KindPosix:
		return posix.New(ps.Name, loc, ps.Path)
	case policies.KindFS:
		return fsstore.New(ps.Name, loc, ps.Path, fsstore.Options{ReadOnly: ps.ReadOnly})
	case policies.KindS3:
		var files aws.CredentialsProvider
		if c.AccessKeyFile != "" || c.SecretKeyFile != "" || c.SessionTokenFile != "" {
			fc := fileCredentials{}
			for _, part := range []struct {
				file, env string
				to        *secret
			}{{c.AccessKeyFile, c.AccessKeyEnv, &fc.ak}, {c.SecretKeyFile, c.SecretKeyEnv, &fc.sk}, {c.SessionTokenFile, c.SessionTokenEnv, &fc.tok}} {
				if part.file != "" {
					*part.to = newSecretFile(part.file)
				} else {
					v, err := env(lookupEnv, part.env)
					if err != nil {
						return nil, err
					}
					*part.to = fixedSecret(v)
				}
			}
			if _, err := fc.Retrieve(ctx); err != nil { // a missing file is an error now, not at the first request
				return nil, err
			}
			files = fc
			c.AccessKeyEnv, c.SecretKeyEnv, c.SessionTokenEnv = "", "", ""
		}
		ak, err := env(lookupEnv, c.AccessKeyEnv)
		if err != nil {
			return nil, err
		}
		sk, err := env(lookupEnv, c.SecretKeyEnv)
		if err != nil {
			return nil, err
		}
		tok, err := env(lookupEnv, c.SessionTokenEnv)
		if err != nil {
			return nil, err
		}
		// The signing region is the AWS region; an S3-compatible server
		// elsewhere (MinIO, Ceph on-prem) signs as us-east-1 and gets
		// MinIO's key rules (keys it would silently rewrite are refused).
		region, custom := "us-east-1", ps.Location.Cloud != "aws"
		if !custom {
			region = ps.Location.Region
		}
		return s3store.New(ctx, s3store.Config{Name: ps.Name, Location: loc, Bucket: ps.Bucket, Region: region,
			Endpoint: ps.Endpoint, PathStyle: ps.PathStyle, AccessKey: ak, SecretKey: sk, SessionToken: tok, Credentials: files,
			Profile: c.Profile, CredentialsFile: c.File, MinIOKeyRules: custom || ps.Endpoint != ""})
	case policies.KindGCS:
		return gcs.New(ctx, gcs.Config{Name: ps.Name, Location: loc, Bucket: ps.Bucket, Endpoint: ps.Endpoint,
			CredentialsFile: c.File, WithoutAuthentication: ps.Endpoint != "" && c.File == ""})
	case policies.KindAzure:
		key, err := env(lookupEnv, c.AccountKeyEnv)
		if err != nil {
			return nil, err
		}
		var keyFile func() (string, error)
		if c.AccountKeyFile != "" {
			f := newSecretFile(c.AccountKeyFile)
			if key, err = f.get(); err != nil {
				return nil, err
			}
			keyFile = f.get
		}
		sas, err := env(lookupEnv, c.SASTokenEnv)
		if err != nil {
			return nil, err
		}
		return azure.New(ctx, azure.Config{Name: ps.Name, Location: loc, Account: ps.Account, Container: ps.Container,
			Endpoint: ps.Endpoint, AccountKey: key, AccountKeyFunc: keyFile, SASToken: sas})
	}
	return nil, fmt.Errorf("unknown store kind %q", ps.Kind)
}
