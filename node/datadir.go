package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A data dir belongs to one process at a time and to one node for ever.
//
//   - lockDir takes an exclusive flock on DIR/fedgate.lock before anything
//     else in the dir is opened, and writes the holder's PID into it: a
//     second process on the same dir is refused at once, naming the PID
//     (not after bolt's lock times out with "open index: timeout").
//   - checkIdentity records the node id (and region) in
//     DIR/node-identity.json on the first start and refuses a start with
//     another: a copied data dir or a changed --node-id would otherwise
//     wait for a leader, or answer "not the leader", for ever.

// LockFileName is the lock file a server holds in its data dir (and cache
// dir) while it runs.
const LockFileName = "fedgate.lock"

// IdentityFileName records, in a data dir, the node and region it belongs to.
const IdentityFileName = "node-identity.json"

// DirInUseError says that another process holds a dir's lock.
type DirInUseError struct {
	Dir  string // the dir
	Flag string // "--data-dir" or "--cache-dir"
	PID  int    // the holder's PID; 0 when it could not be read
	Info string // what else the lock file says (start time)
}

func (e *DirInUseError) Error() string {
	what := strings.TrimPrefix(e.Flag, "--")
	what = strings.ReplaceAll(what, "-", " ")
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	detail := "it holds " + filepath.Join(e.Dir, LockFileName)
	if e.Info != "" {
		detail = e.Info + "; " + detail
	}
	return fmt.Sprintf("%s %s is in use by %s (%s): stop that process first, or give this one its own %s",
		what, e.Dir, who, detail, e.Flag)
}

// lockDir takes dir's lock file for this process (flock LOCK_EX|LOCK_NB),
// or returns a *DirInUseError naming the process holding it. The lock
// lasts until the returned file is closed (or the process ends).
func lockDir(dir, flag string, now time.Time) (*os.File, error) {
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock %s %s: %w", flag, dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			e := &DirInUseError{Dir: dir, Flag: flag}
			if b, rerr := os.ReadFile(path); rerr == nil {
				e.PID, e.Info = parseLockFile(b)
			}
			return nil, e
		}
		return nil, fmt.Errorf("lock %s %s: %w", flag, dir, err)
	}
	content := fmt.Sprintf("pid %d\nstarted %s\n", os.Getpid(), now.UTC().Format(time.RFC3339))
	// The PID is for the message of the next process refused; the lock
	// holds without it.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(content), 0)
	}
	return f, nil
}

// parseLockFile reads the PID and start time a lock file names.
func parseLockFile(b []byte) (pid int, info string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "pid":
			pid, _ = strconv.Atoi(v)
		case "started":
			info = "started " + v
		}
	}
	return pid, info
}

// nodeIdentity is what IdentityFileName holds.
type nodeIdentity struct {
	NodeID  string    `json:"node_id"`
	Region  string    `json:"region,omitempty"`
	Created time.Time `json:"created"`
}

// IdentityMismatchError says that a data dir belongs to another node (or
// region) than the one being started.
type IdentityMismatchError struct {
	Dir           string
	Recorded, Got string // the ids ("" Recorded: not known, see Members)
	Region        bool   // the region differs, not the node id
	// Members is set when the data dir had no identity file (made before
	// it existed) and its Raft state names the region's members, of which
	// this node's id is not one.
	Members []string
}

func (e *IdentityMismatchError) Error() string {
	file := filepath.Join(e.Dir, IdentityFileName)
	if e.Members != nil {
		was := "one of " + strings.Join(e.Members, ", ")
		if e.Recorded != "" {
			was = e.Recorded
		}
		return fmt.Sprintf("data dir %s holds the Raft state of a region whose members are %s, but this node was started with --node-id %s, which is none of them: "+
			"start it with its own id (--node-id %s), or give node %s a fresh --data-dir (a node id never changes once used; a fresh node joins with --join)",
			e.Dir, strings.Join(e.Members, ", "), e.Got, was, e.Got)
	}
	if e.Region {
		return fmt.Sprintf("data dir %s belongs to region %q (recorded in %s on its first start), but this node was started with --region %s: "+
			"start it with --region %s, or use a fresh --data-dir for region %s", e.Dir, e.Recorded, file, e.Got, e.Recorded, e.Got)
	}
	return fmt.Sprintf("data dir %s belongs to node %q (recorded in %s on its first start), but this node was started with --node-id %s: "+
		"start it with --node-id %s, or give node %s a fresh --data-dir (a node id never changes once used; a fresh node joins with --join)",
		e.Dir, e.Recorded, file, e.Got, e.Recorded, e.Got)
}

// checkIdentity records nodeID and region in dir on the first start and
// refuses later starts with another node id, or another region (when both
// name one: "" is the policy's only region). created: the record was made
// now (a fresh data dir, or one from before the record existed: see
// checkMembership).
func checkIdentity(dir, nodeID, region string, now time.Time) (created bool, err error) {
	return checkIdentityFile(dir, nodeID, region, now)
}

// checkMembership refuses, on the start that recorded the identity of a
// data dir that already held Raft state (made before the record existed),
// a node id that is none of the region's members there: it would wait for
// a leader, or answer "not the leader", for ever. The record is removed
// again so that the right id can be given. self is this node's Raft
// address.
func checkMembership(dir, nodeID, self string, members []string, addrs []string) error {
	if len(members) == 0 || slices.Contains(members, nodeID) {
		return nil
	}
	_ = os.Remove(filepath.Join(dir, IdentityFileName))
	e := &IdentityMismatchError{Dir: dir, Got: nodeID, Members: slices.Clone(members)}
	for i, a := range addrs {
		if a == self && self != "" {
			e.Recorded = members[i]
		}
	}
	if e.Recorded == "" && len(members) == 1 {
		e.Recorded = members[0]
	}
	return e
}

func checkIdentityFile(dir, nodeID, region string, now time.Time) (bool, error) {
	path := filepath.Join(dir, IdentityFileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var id nodeIdentity
		if err := json.Unmarshal(b, &id); err != nil {
			return false, fmt.Errorf("read %s: %w (it records which node the data dir belongs to; remove it only if this is that node)", path, err)
		}
		if id.NodeID != nodeID {
			return false, &IdentityMismatchError{Dir: dir, Recorded: id.NodeID, Got: nodeID}
		}
		if id.Region != "" && region != "" && id.Region != region {
			return false, &IdentityMismatchError{Dir: dir, Recorded: id.Region, Got: region, Region: true}
		}
		if id.Region == "" && region != "" {
			id.Region = region
			return false, writeIdentity(path, id)
		}
		return false, nil
	case errors.Is(err, os.ErrNotExist):
		return true, writeIdentity(path, nodeIdentity{NodeID: nodeID, Region: region, Created: now.UTC()})
	default:
		return false, fmt.Errorf("read %s: %w", path, err)
	}
}

func writeIdentity(path string, id nodeIdentity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("record the node's identity: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record the node's identity in %s: %w", path, err)
	}
	return nil
}
