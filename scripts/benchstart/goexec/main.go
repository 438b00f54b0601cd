// Command goexec replaces itself with the command its arguments name (an
// absolute path, then its arguments) and does nothing else: the least any
// Go program costs that starts a command in place, as poolagent-run does.
// benchstart times it beside the other ways, as the floor of a Go client.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: goexec /ABSOLUTE/PATH [ARGS...]")
		os.Exit(2)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "goexec: %s: %v\n", os.Args[1], err)
	os.Exit(127)
}
