package main

import (
	"fmt"
	"io"
)

func demoMain(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "dlock demo: not yet")
	return exitSoftware
}
