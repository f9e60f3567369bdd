// Command benchexec runs a command N times and reports its wall time from
// exec to exit, its CPU time (user + system) and its peak resident set
// size, all from the kernel's rusage of each child: no external tool, and
// CPU time stays meaningful on a busy machine where wall time does not.
//
//	go run ./tools/benchexec -n 50 -- ./ironic-agent inventory
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 50, "number of runs")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: benchexec [-n RUNS] -- COMMAND [ARGS...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *n < 1 {
		flag.Usage()
		os.Exit(2)
	}
	var walls, cpus []time.Duration
	var maxRSS int64
	for range *n {
		cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
		start := time.Now()
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "benchexec: %v: %v\n", cmd.Args, err)
			os.Exit(1)
		}
		walls = append(walls, time.Since(start))
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			fmt.Fprintln(os.Stderr, "benchexec: no rusage on this system")
			os.Exit(1)
		}
		cpus = append(cpus, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		maxRSS = max(maxRSS, ru.Maxrss) // KiB on Linux
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	q := func(d []time.Duration, p float64) string {
		return fmt.Sprintf("%.1f", float64(d[int(p*float64(len(d)-1))].Microseconds())/1000)
	}
	fmt.Printf("runs=%d wall_ms_median=%s wall_ms_p90=%s wall_ms_max=%s cpu_ms_median=%s peak_rss_kib=%d\n",
		*n, q(walls, 0.5), q(walls, 0.9), q(walls, 1), q(cpus, 0.5), maxRSS)
}
