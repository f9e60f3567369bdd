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

// InitLogFile is where the ramdisk's init keeps its own log from its
// first line (the console scrolls away, and the agent's log starts only
// once the network is up); the agent puts it into the log bundle of
// log.collect_system_logs.
const InitLogFile = "/run/ironic-agent/init.log"

// BootMAC is the MAC address of the NIC the machine booted from, for the
// first log lines of the init and the agent: BOOTIF (a MAC, already
// normalised) when given, as the agent takes it for its boot interface;
// otherwise the first NIC by name below sysClassNet (/sys/class/net) with
// an Ethernet address and a link (carrier); "none" when there is neither.
func BootMAC(bootif, sysClassNet string) string {
	if bootif != "" {
		return bootif
	}
	ents, err := os.ReadDir(sysClassNet)
	if err != nil {
		return "none"
	}
	for _, e := range ents { // sorted by name
		dir := sysClassNet + "/" + e.Name()
		typ, _ := os.ReadFile(dir + "/type")
		carrier, _ := os.ReadFile(dir + "/carrier")
		addr, _ := os.ReadFile(dir + "/address")
		// type 1: ARPHRD_ETHER (not the loopback, not a tunnel).
		if strings.TrimSpace(string(typ)) == "1" && strings.TrimSpace(string(carrier)) == "1" {
			if a := strings.TrimSpace(string(addr)); a != "" && a != "00:00:00:00:00:00" {
				return a
			}
		}
	}
	return "none"
}
