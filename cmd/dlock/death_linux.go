package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel SIGKILL cmd if dlock dies first, so a demo
// killed with SIGKILL leaves no server behind.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
