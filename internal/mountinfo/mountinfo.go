// Package mountinfo answers what is mounted where, from
// /proc/self/mountinfo (Linux).
package mountinfo

import (
	"bufio"
	"os"
	"strings"
)

// FSType is the file system type of the mount whose mount point is dir
// (an absolute path as the kernel shows it, e.g. "fuse.fedgate"); ok is
// false when nothing is mounted there or mountinfo cannot be read.
func FSType(dir string) (fstype string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[4] != dir {
			continue
		}
		fstype, ok = "", true // a later line for the same point is mounted over it
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) {
				fstype = fields[i+1]
				break
			}
		}
	}
	return fstype, ok
}
