package catalog

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMemberLogs: the catalog's Raft log lines reach the member's logger
// (the node gives it its own, component=catalog) under logger=raft; they
// were discarded before the catalog used raft/rlog.
func TestMemberLogs(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "log.json")) // writes from many goroutines: one syscall each
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug - 8})).With("component", "catalog")
	addr := freeAddr(t)
	m, err := OpenMember(MemberConfig{Region: "a", NodeID: "n1", Bind: addr, Voters: map[string]string{"a": addr},
		Dir: filepath.Join(dir, "catalog"), Secret: []byte("s"), RTT: 20 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitFor(t, func() bool {
		b, err := os.ReadFile(out.Name())
		return err == nil && strings.Contains(string(b), `"msg":"entering leader state","component":"catalog","logger":"raft"`)
	})
}
