package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// AzureServer is a running Azurite blob service.
type AzureServer struct {
	Endpoint         string // "http://127.0.0.1:PORT/devstoreaccount1"
	Account          string // "devstoreaccount1"
	AccountKey       string // Azurite's well-known development key
	ConnectionString string // full connection string for azblob.NewClientFromConnectionString
}

// Azurite's fixed development account. The key is public, documented by
// Microsoft, and only valid against the emulator.
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

var azuriteServer server[AzureServer]

// Azurite returns the test binary's Azurite blob server, starting it on
// first use. It skips the test when Azurite or node is not installed (fails
// under CI).
func Azurite(t testing.TB) *AzureServer {
	t.Helper()
	return azuriteServer.get(t, startAzurite)
}

func azuritePath() string {
	return filepath.Join(CacheDir(), "azurite", "node_modules", ".bin", "azurite-blob")
}

func startAzurite() (*AzureServer, error) {
	script, err := lookBinary("azurite", azuritePath())
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node (for azurite) %w on PATH", errMissing)
	}
	dir, err := workDir("azurite")
	if err != nil {
		return nil, err
	}
	a := &AzureServer{Account: azuriteAccount, AccountKey: azuriteKey}
	_, err = startWithPorts(1, func(ports []int, attempt int) (spec, error) {
		port := strconv.Itoa(ports[0])
		a.Endpoint = "http://127.0.0.1:" + port + "/" + azuriteAccount
		a.ConnectionString = "DefaultEndpointsProtocol=http;AccountName=" + azuriteAccount +
			";AccountKey=" + azuriteKey + ";BlobEndpoint=" + a.Endpoint + ";"
		return spec{
			name: "azurite",
			dir:  dir,
			path: node,
			args: []string{
				script,
				"--blobHost", "127.0.0.1",
				"--blobPort", port,
				"--location", filepath.Join(dir, fmt.Sprintf("data%d", attempt)),
				"--skipApiVersionCheck",
				"--loose",
				"--disableTelemetry",
				"--silent",
			},
			// Unauthenticated, so any HTTP answer (403) means it is serving.
			ready: httpReady(a.Endpoint + "?comp=list"),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// NewContainer creates a container with a fresh unique name (3-63
// characters, lowercase) and returns the name. It is not deleted after the
// test.
func (a *AzureServer) NewContainer(t testing.TB) string {
	t.Helper()
	name := uniqueName(t.Name(), 63)
	c, err := azblob.NewClientFromConnectionString(a.ConnectionString, nil)
	if err != nil {
		t.Fatalf("testenv: azblob client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateContainer(ctx, name, nil); err != nil {
		t.Fatalf("testenv: creating Azurite container %q: %v", name, err)
	}
	return name
}
