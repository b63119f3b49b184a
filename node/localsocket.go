package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"strconv"
)

// listenLocal listens on the Unix socket path (--local-socket) with the
// given mode (0: 0660) and group ("": the server's): who may connect is
// decided by the file's mode and group, and every request on it is then
// signed like any S3 request. A socket file left by a node that died is
// replaced; any other file at path is an error.
func listenLocal(path string, mode os.FileMode, group string) (net.Listener, error) {
	if mode == 0 {
		mode = 0o660
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("--local-socket %s: a file that is not a socket is there; remove it or choose another path", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("--local-socket %s: another server is listening on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--local-socket %s: remove the stale socket: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--local-socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--local-socket %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	fail := func(err error) (net.Listener, error) {
		l.Close()
		return nil, fmt.Errorf("--local-socket %s: %w", path, err)
	}
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			if g, err = user.LookupGroupId(group); err != nil {
				return fail(fmt.Errorf("group %q: %w", group, err))
			}
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, -1, gid); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return fail(err)
	}
	return l, nil
}
