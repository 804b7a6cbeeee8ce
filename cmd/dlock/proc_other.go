//go:build !unix

package main

import (
	"os/exec"
	"syscall"
)

func setProcessGroup(cmd *exec.Cmd) {}

// signalGroup can only kill cmd itself where there are no process groups.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		_ = cmd.Process.Kill()
	}
}
