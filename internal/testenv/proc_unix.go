//go:build unix && !linux

package testenv

import "syscall"

// sysProcAttr puts the server in its own process group so Stop reaches
// anything it spawns.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
