package node

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/fedgate/fedgate/federation/store"
	"github.com/fedgate/fedgate/federation/store/azure"
	"github.com/fedgate/fedgate/federation/store/gcs"
	"github.com/fedgate/fedgate/federation/store/posix"
	s3store "github.com/fedgate/fedgate/federation/store/s3"
	"github.com/fedgate/fedgate/policies"
)

// openStores opens the policy's stores, or the embedded on-prem store. It
// returns the stores by name and the default store's name. Secrets are read
// here, once, from the environment variables the policy names (lookupEnv).
func openStores(ctx context.Context, dataDir string, p *policies.Policy, lookupEnv func(string) (string, bool)) (map[string]store.Store, string, error) {
	stores := map[string]store.Store{}
	if p == nil || len(p.Stores) == 0 {
		st, err := posix.New("local", policies.Location{Cloud: "onprem", Region: "local"}, filepath.Join(dataDir, "store"))
		if err != nil {
			return nil, "", err
		}
		stores["local"] = st
		return stores, "local", nil
	}
	for _, ps := range p.Stores {
		st, err := openStore(ctx, ps, lookupEnv)
		if err != nil {
			return nil, "", fmt.Errorf("store %q (%s): %w", ps.Name, ps.Kind, err)
		}
		stores[ps.Name] = st
	}
	def, ok := p.DefaultStore()
	if !ok {
		def = p.Stores[0]
	}
	return stores, def.Name, nil
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
	case policies.KindS3:
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
			Endpoint: ps.Endpoint, PathStyle: ps.PathStyle, AccessKey: ak, SecretKey: sk, SessionToken: tok,
			Profile: c.Profile, CredentialsFile: c.File, MinIOKeyRules: custom || ps.Endpoint != ""})
	case policies.KindGCS:
		return gcs.New(ctx, gcs.Config{Name: ps.Name, Location: loc, Bucket: ps.Bucket, Endpoint: ps.Endpoint,
			CredentialsFile: c.File, WithoutAuthentication: ps.Endpoint != "" && c.File == ""})
	case policies.KindAzure:
		key, err := env(lookupEnv, c.AccountKeyEnv)
		if err != nil {
			return nil, err
		}
		sas, err := env(lookupEnv, c.SASTokenEnv)
		if err != nil {
			return nil, err
		}
		return azure.New(ctx, azure.Config{Name: ps.Name, Location: loc, Account: ps.Account, Container: ps.Container,
			Endpoint: ps.Endpoint, AccountKey: key, SASToken: sas})
	}
	return nil, fmt.Errorf("unknown store kind %q", ps.Kind)
}
