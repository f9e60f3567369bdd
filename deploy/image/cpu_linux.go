package image

import (
	"syscall"
	"time"
)

// readProcessCPU is the agent process's CPU time and context switches so
// far (getrusage RUSAGE_SELF, all its threads); ok is false when the
// kernel refused.
func readProcessCPU() (c processCPU, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return processCPU{}, false
	}
	return processCPU{
		User:     time.Duration(ru.Utime.Nano()),
		System:   time.Duration(ru.Stime.Nano()),
		Switches: ru.Nvcsw + ru.Nivcsw,
	}, true
}
