package node

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	f, err := lockDir(dir, "--data-dir", now)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: a second open is refused, in
	// this process too, naming the holder's PID and start.
	_, err = lockDir(dir, "--data-dir", now)
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Fatalf("second lock: %v", err)
	}
	for _, want := range []string{"data dir " + dir + " is in use by process", "started 2026-12-07T01:00:00Z", "its own --data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q lacks %q", err, want)
		}
	}
	_, err = lockDir(dir, "--cache-dir", now)
	if err == nil || !strings.HasPrefix(err.Error(), "cache dir ") || !strings.HasSuffix(err.Error(), "its own --cache-dir") {
		t.Fatalf("cache dir: %v", err)
	}
	f.Close()
	f, err = lockDir(dir, "--data-dir", now)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	f.Close()
}

func TestCheckIdentity(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if _, err := checkIdentity(dir, "n1", "", now); err != nil {
		t.Fatal(err)
	}
	if _, err := checkIdentity(dir, "n1", "east", now); err != nil { // the region is recorded once named
		t.Fatal(err)
	}
	if _, err := checkIdentity(dir, "n1", "", now); err != nil { // "": the policy's only region
		t.Fatal(err)
	}
	var mm *IdentityMismatchError
	_, err := checkIdentity(dir, "n2", "east", now)
	if !errors.As(err, &mm) || mm.Region || !strings.Contains(err.Error(), `belongs to node "n1"`) || !strings.Contains(err.Error(), "start it with --node-id n1") {
		t.Fatalf("another node id: %v", err)
	}
	_, err = checkIdentity(dir, "n1", "west", now)
	if !errors.As(err, &mm) || !mm.Region || !strings.Contains(err.Error(), `belongs to region "east"`) || !strings.Contains(err.Error(), "start it with --region east") {
		t.Fatalf("another region: %v", err)
	}
	if err := os.WriteFile(dir+"/"+IdentityFileName, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkIdentity(dir, "n1", "", now); err == nil {
		t.Fatal("a damaged identity file was accepted")
	}
}

// A data dir from before the identity record: its Raft members say whose
// it is, and the record made on the refused start is removed again.
func TestCheckMembership(t *testing.T) {
	dir := t.TempDir()
	created, err := checkIdentity(dir, "n2", "", time.Now())
	if err != nil || !created {
		t.Fatalf("first record: %v, %v", created, err)
	}
	err = checkMembership(dir, "n2", "10.0.0.2:7000", []string{"n1", "n3"}, []string{"10.0.0.2:7000", "10.0.0.3:7000"})
	var mm *IdentityMismatchError
	if !errors.As(err, &mm) || mm.Recorded != "n1" || !strings.Contains(err.Error(), "start it with its own id (--node-id n1)") {
		t.Fatalf("not a member: %v", err)
	}
	if _, serr := os.Stat(dir + "/" + IdentityFileName); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the record of the refused id stayed: %v", serr)
	}
	if err := checkMembership(dir, "n3", "", []string{"n1", "n3"}, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if err := checkMembership(dir, "n9", "", nil, nil); err != nil { // no Raft state yet
		t.Fatal(err)
	}
}
