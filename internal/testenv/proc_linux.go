package testenv

import "syscall"

// sysProcAttr puts the server in its own process group (so Stop reaches
// anything it spawns) and has the kernel kill it when the thread that
// started it dies, so a crashed or timed-out test binary leaves no server
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
