// Command programs (progguest in its output) is the /init of the ramdisk
// TestProgramsStart (e2e/ramdisk/modules) boots: the agent ramdisk's init
// as PID 1, which runs "progguest check" as its command with the
// environment it gives the agent. That runs every program of the registry
// (internal/programs) with its harmless Check arguments through
// blockdev.ExecRunner, as the agent would, printing for each
// "progguest: ok NAME" or "progguest: fail NAME ERROR".
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/programs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
)

func main() {
	if os.Getpid() == 1 {
		err := rdinit.Main(context.Background(), os.Stdout, nil)
		fmt.Println("progguest init:", err)
		_ = rdinit.Halt(false)
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fmt.Fprintln(os.Stderr, "usage: progguest check (in the test's ramdisk)")
		os.Exit(2)
	}
	fmt.Println("progguest: PATH", os.Getenv("PATH"))
	for _, p := range programs.All() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := blockdev.ExecRunner{}.Run(ctx, p.Name, p.Check...)
		cancel()
		if err != nil {
			fmt.Printf("progguest: fail %s %s\n", p.Name, strings.Join(strings.Fields(err.Error()), " "))
			continue
		}
		fmt.Printf("progguest: ok %s\n", p.Name)
	}
	fmt.Println("progguest: done")
}
