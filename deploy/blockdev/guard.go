package blockdev

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/inventory"
)

// Guard decides whether a device may be written or erased. Every write and
// erase in the deploy packages asks a Guard first, so a wrong device name, a
// symlink pointing somewhere unexpected, or a disk holding the running
// system is refused before a single byte moves.
type Guard struct {
	// allowed holds the allow list as given; entries are resolved on every
	// Check because /dev/disk/by-* links may appear after the Guard is built.
	allowed []string
	// root is the directory /proc and /sys are read below ("/" in
	// production); tests point it at a fake tree.
	root string
	// stat reports the device number of a path; os-backed in production.
	stat func(path string) (devInfo, error)
}

// devInfo is what the Guard needs to know about a path.
type devInfo struct {
	block bool   // a block special file
	rdev  uint64 // device number of a block device
	reg   bool   // a regular file (only allowed when listed explicitly)
}

// ErrRefused is wrapped by every refusal of Check, so callers can tell a
// safety refusal from an I/O error.
var ErrRefused = errors.New("refused by device guard")

// NewGuard returns a Guard confined to allowed (device paths, symlinks are
// resolved). An empty list allows any block device, still refusing devices
// that are mounted, used as swap, or hold the running root filesystem.
func NewGuard(allowed []string) *Guard {
	var clean []string
	for _, a := range allowed {
		if a = strings.TrimSpace(a); a != "" {
			clean = append(clean, a)
		}
	}
	return &Guard{allowed: clean, root: "/", stat: osStat}
}

// Allowed returns the allow list the Guard was built with (nil when any
// device is allowed).
func (g *Guard) Allowed() []string { return slices.Clone(g.allowed) }

func osStat(path string) (devInfo, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return devInfo{}, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return devInfo{block: true, rdev: uint64(st.Rdev)}, nil
	case unix.S_IFREG:
		return devInfo{reg: true}, nil
	}
	return devInfo{}, nil
}

// Check returns nil when dev may be written or erased, else an error that
// wraps ErrRefused and says why.
func (g *Guard) Check(dev string) error {
	if dev == "" {
		return fmt.Errorf("%w: no device named", ErrRefused)
	}
	resolved, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return fmt.Errorf("%w: device %s: %v", ErrRefused, dev, err)
	}
	resolved, err = filepath.Abs(resolved)
	if err != nil {
		return fmt.Errorf("%w: device %s: %v", ErrRefused, dev, err)
	}
	what := dev
	if resolved != dev {
		what = fmt.Sprintf("%s (-> %s)", dev, resolved)
	}
	explicit := false
	if len(g.allowed) > 0 {
		explicit = g.listed(resolved)
		if !explicit {
			if ok, why := g.covered(resolved, 0); !ok {
				if why != "" {
					why = ": " + why
				}
				return fmt.Errorf("%w: device %s is not in the allowed devices [%s]%s",
					ErrRefused, what, strings.Join(g.allowed, ", "), why)
			}
		}
	}
	info, err := g.stat(resolved)
	if err != nil {
		return fmt.Errorf("%w: device %s: %v", ErrRefused, what, err)
	}
	if info.reg && explicit {
		// A plain file named explicitly in the allow list: used by tests
		// and by operators writing an image into a file. Nothing can be
		// mounted from it without a loop device, which is checked itself.
		return nil
	}
	if !info.block {
		return fmt.Errorf("%w: %s is not a block device", ErrRefused, what)
	}
	return g.checkInUse(what, info.rdev)
}

// listed reports whether dev (a resolved path) is named by an entry of
// the allow list.
func (g *Guard) listed(dev string) bool {
	for _, a := range g.allowed {
		ra, err := filepath.EvalSymlinks(a)
		if err != nil {
			continue // an allowed name that does not exist matches nothing
		}
		if ra, err = filepath.Abs(ra); err == nil && ra == dev {
			return true
		}
	}
	return false
}

// covered reports whether dev (a resolved path) is allowed through what
// it is built on: a partition whose disk is allowed (the metadata wipe
// clears partitions before their disk), or an md array every member of
// which is allowed (a RAID root is written through /dev/mdN, never through
// the disks the operator listed). When an md array is what stops it, why
// says which member.
func (g *Guard) covered(dev string, depth int) (ok bool, why string) {
	if g.listed(dev) {
		return true, ""
	}
	// md arrays of partitions of md arrays are legal; a loop in a corrupt
	// or fake tree must still end.
	if depth > 8 {
		return false, ""
	}
	name := filepath.Base(dev)
	sys := filepath.Join(g.root, "sys/class/block", name)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		real, err := filepath.EvalSymlinks(sys)
		if err != nil {
			return false, ""
		}
		return g.covered(filepath.Join(g.root, "dev", filepath.Base(filepath.Dir(real))), depth+1)
	}
	if _, err := os.Stat(filepath.Join(sys, "md")); err != nil {
		return false, ""
	}
	members, err := os.ReadDir(filepath.Join(sys, "slaves"))
	if err != nil || len(members) == 0 {
		// An inactive array has no members to vouch for it.
		return false, fmt.Sprintf("md device %s has no member devices", name)
	}
	for _, m := range members {
		member := filepath.Join(g.root, "dev", m.Name())
		if ok, why := g.covered(member, depth+1); !ok {
			if why == "" {
				why = fmt.Sprintf("md device %s is built on %s, which is not allowed", name, member)
			}
			return false, why
		}
	}
	return true, ""
}

// checkInUse refuses a device when it, one of its partitions, or a device
// stacked on top of either (dm, md, LVM holders) is mounted or is swap.
func (g *Guard) checkInUse(what string, rdev uint64) error {
	used, err := g.usedDevices()
	if err != nil {
		// Not knowing what is mounted is not permission to write.
		return fmt.Errorf("%w: device %s: cannot tell what is mounted: %v", ErrRefused, what, err)
	}
	for _, n := range g.family(rdev) {
		if why, ok := used[n]; ok {
			return fmt.Errorf("%w: device %s is in use: %s", ErrRefused, what, why)
		}
	}
	return nil
}

// usedDevices maps the device number of every mounted or swap device to a
// description of its use.
func (g *Guard) usedDevices() (map[uint64]string, error) {
	used := map[uint64]string{}
	f, err := os.Open(filepath.Join(g.root, "proc/self/mountinfo"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// mountinfo: id parent major:minor root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mnt := UnescapeMount(fields[4])
		use := "mounted on " + mnt
		if mnt == "/" {
			use = "holds the running root filesystem (mounted on /)"
		}
		if n, ok := parseMajMin(fields[2]); ok && unix.Major(n) != 0 {
			if _, seen := used[n]; !seen || mnt == "/" {
				used[n] = use
			}
		}
		// btrfs and friends report an anonymous 0:N; the source names the
		// real device.
		if i := slices.Index(fields, "-"); i >= 0 && i+2 < len(fields) {
			src := UnescapeMount(fields[i+2])
			if strings.HasPrefix(src, "/dev/") {
				if info, err := g.stat(src); err == nil && info.block {
					if _, seen := used[info.rdev]; !seen || mnt == "/" {
						used[info.rdev] = use
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(g.root, "proc/swaps")); err == nil {
		for i, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if i == 0 || len(fields) == 0 || !strings.HasPrefix(fields[0], "/dev/") {
				continue
			}
			if info, err := g.stat(UnescapeMount(fields[0])); err == nil && info.block {
				used[info.rdev] = "used as swap"
			}
		}
	}
	return used, nil
}

// family returns rdev, its partitions and everything stacked on any of them
// (holders, transitively), as device numbers read from sysfs.
func (g *Guard) family(rdev uint64) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	var walk func(n uint64, depth int)
	walk = func(n uint64, depth int) {
		if seen[n] || depth > 16 {
			return
		}
		seen[n] = true
		out = append(out, n)
		dir := filepath.Join(g.root, "sys/dev/block", fmt.Sprintf("%d:%d", unix.Major(n), unix.Minor(n)))
		// Partitions are subdirectories that carry a "partition" file.
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				if _, err := os.Stat(filepath.Join(dir, e.Name(), "partition")); err != nil {
					continue
				}
				if m, ok := readMajMin(filepath.Join(dir, e.Name(), "dev")); ok {
					walk(m, depth+1)
				}
			}
		}
		if ents, err := os.ReadDir(filepath.Join(dir, "holders")); err == nil {
			for _, e := range ents {
				if m, ok := readMajMin(filepath.Join(g.root, "sys/class/block", e.Name(), "dev")); ok {
					walk(m, depth+1)
				}
			}
		}
	}
	walk(rdev, 0)
	return out
}

// Filter returns the disks Check allows, in their original order: the
// disks the agent may choose as root disk or erase.
func (g *Guard) Filter(disks []inventory.Disk) []inventory.Disk {
	out := []inventory.Disk{}
	for _, d := range disks {
		if g.Check(d.Name) == nil {
			out = append(out, d)
		}
	}
	return out
}

func readMajMin(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseMajMin(strings.TrimSpace(string(b)))
}

func parseMajMin(s string) (uint64, bool) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return unix.Mkdev(uint32(a), uint32(b)), true
}

// UnescapeMount undoes the octal escapes (\040 for space etc.) the kernel
// uses in mountinfo and swaps.
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
