//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in a process group of its own, so that
// stopping it reaches everything it started, and a terminal's Ctrl-C
// reaches it once, forwarded by dlock.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
