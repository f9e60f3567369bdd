package logging

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Seconds formats a duration for a log field as seconds with millisecond
// precision ("1.234"), the unit the ramdisk's boot lines use.
func Seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// Uptime is the kernel's uptime in seconds as /proc/uptime gives it, or
// "?": boot measurements then include the firmware and kernel phases.
func Uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
