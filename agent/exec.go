package agent

import "os/exec"

// lookPath reports whether a tool is installed; a function so the decision
// is visible where it is made.
func lookPath(name string) (string, error) { return exec.LookPath(name) }
