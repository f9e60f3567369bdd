package hostguard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// namedFiles are recorded with their content, so a difference shows what
// was written; they are left out of the /etc walk.
var namedFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/hostname"}

// etcExcluded are paths below /etc whose content changes for reasons that
// are not the tests' doing. Keep it short, each with its reason.
var etcExcluded = []string{
	// ldconfig rebuilds it whenever a library is installed (apt triggers).
	"/etc/ld.so.cache",
}

// netSysctlDirs are the directories below /proc/sys whose files are
// recorded (not recursively: per-interface directories come and go with
// other tests' links, and the links themselves are checked).
var netSysctlDirs = []string{
	"net/core", "net/ipv4", "net/ipv6", "net/unix",
	"net/ipv4/conf/all", "net/ipv4/conf/default",
	"net/ipv6/conf/all", "net/ipv6/conf/default",
}

// maxShown is the largest content recorded as text; larger files are
// recorded by hash.
const maxShown = 512

func below(o Options, p string) string { return filepath.Join(o.Root, p) }

// contentValue is what a file's content is recorded as: the text when it
// is short and printable, else its SHA-256.
func contentValue(b []byte) string {
	if len(b) <= maxShown && !bytes.ContainsFunc(b, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' }) {
		return strconv.Quote(string(b))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func snapFiles(s *Snapshot, o Options) error {
	for _, p := range namedFiles {
		b, err := os.ReadFile(below(o, p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			s.skip("%s: %v", p, err)
		default:
			s.Items["file "+p] = contentValue(b)
		}
	}
	for _, name := range []string{"hostname", "domainname"} {
		p := "/proc/sys/kernel/" + name
		b, err := os.ReadFile(below(o, p))
		if err != nil {
			s.skip("kernel %s: %v", name, err)
			continue
		}
		s.Items["hostname kernel "+name] = strconv.Quote(strings.TrimSpace(string(b)))
	}
	return nil
}

// snapEtc records every entry below /etc: type, mode, owner and, for files,
// the content's hash (never times: apt and editors touch them freely).
func snapEtc(s *Snapshot, o Options) error {
	root := below(o, "/etc")
	unreadable := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, path)
		name := filepath.Join("/etc", rel)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				unreadable++
				return nil
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walk
			}
			return err
		}
		if slices.Contains(namedFiles, name) || slices.Contains(etcExcluded, name) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walk
		} else if err != nil {
			return err
		}
		owner := ""
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			owner = fmt.Sprintf(" %d:%d", st.Uid, st.Gid)
		}
		v := fmt.Sprintf("%v%s", info.Mode(), owner)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			v += " -> " + target
		case info.Mode().IsRegular():
			sum, err := fileHash(path)
			if errors.Is(err, fs.ErrPermission) {
				unreadable++
				v += " unreadable"
			} else if errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			} else {
				v += " " + sum
			}
		}
		s.Items["etc "+name] = v
		return nil
	})
	if unreadable > 0 {
		s.skip("%d entries below /etc are unreadable (not root?): compared by type, mode and owner only", unreadable)
	}
	return err
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func snapSysctls(s *Snapshot, o Options) error {
	for _, dir := range netSysctlDirs {
		entries, err := os.ReadDir(below(o, "/proc/sys/"+dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6, or no unix sockets
		} else if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			// Write-only entries (route/flush) and ones that refuse reading
			// (stable_secret before it is set) have no value to compare.
			b, err := os.ReadFile(below(o, "/proc/sys/"+dir+"/"+e.Name()))
			if err != nil {
				continue
			}
			s.Items["sysctl "+dir+"/"+e.Name()] = strconv.Quote(strings.TrimSpace(string(b)))
		}
	}
	return nil
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct{ point, fstype, source string }

func readMounts(o Options) ([]mountEntry, error) {
	f, err := os.Open(below(o, "/proc/self/mountinfo"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads the kernel's mountinfo format.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+3 {
			return nil, fmt.Errorf("mountinfo: malformed line %q", sc.Text())
		}
		out = append(out, mountEntry{point: unescapeOctal(fields[4]), fstype: fields[sep+1], source: unescapeOctal(fields[sep+2])})
	}
	return out, sc.Err()
}

// unescapeOctal undoes the kernel's \040-style escaping in mountinfo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// runNetnsMount is the bind mount iproute2 makes of /run/netns the first
// time any namespace is named, and never undoes: the first "ip netns add"
// on a fresh machine leaves it whoever runs it.
const runNetnsMount = "/run/netns"

func snapMounts(s *Snapshot, o Options) error {
	mounts, err := readMounts(o)
	if err != nil {
		s.skip("mount table: %v", err)
		return nil
	}
	for _, m := range mounts {
		if m.fstype == "nsfs" {
			s.Items["netns "+m.point] = ""
			continue
		}
		if m.point == runNetnsMount {
			continue
		}
		k := fmt.Sprintf("mount %s %s %s", m.point, m.fstype, m.source)
		n, _ := strconv.Atoi(s.Items[k])
		s.Items[k] = strconv.Itoa(n + 1)
	}
	return nil
}

func snapLoops(s *Snapshot, o Options) error {
	devs, err := filepath.Glob(below(o, "/sys/block/loop*"))
	if err != nil {
		return err
	}
	for _, d := range devs {
		// loop/backing_file exists only while the device is attached.
		b, err := os.ReadFile(filepath.Join(d, "loop", "backing_file"))
		if err != nil {
			continue
		}
		s.Items["loop /dev/"+filepath.Base(d)] = strconv.Quote(strings.TrimSpace(string(b)))
	}
	return nil
}

func snapNetns(s *Snapshot, o Options) error {
	entries, err := os.ReadDir(below(o, "/run/netns"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		s.Items["netns /run/netns/"+e.Name()] = ""
	}
	return nil
}

func snapEFIVars(s *Snapshot, o Options) error {
	dir := below(o, "/sys/firmware/efi/efivars")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		s.skip("EFI variables: no efivarfs at %s (BIOS machine, or not mounted)", dir)
		return nil
	} else if err != nil {
		return err
	}
	unreadable := 0
	for _, e := range entries {
		sum, err := fileHash(filepath.Join(dir, e.Name()))
		if err != nil {
			unreadable++
			sum = "unreadable"
		}
		s.Items["efivar "+e.Name()] = sum
	}
	if unreadable > 0 {
		s.skip("%d EFI variables are unreadable (not root?): compared by name only", unreadable)
	}
	return nil
}

// snapPstore records the kernel's crash records by name: the agent's
// erase_pstore clean step deletes them, and a test must never reach the
// host's.
func snapPstore(s *Snapshot, o Options) error {
	entries, err := os.ReadDir(below(o, "/sys/fs/pstore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		s.skip("pstore: %v", err)
		return nil
	}
	for _, e := range entries {
		s.Items["pstore "+e.Name()] = ""
	}
	return nil
}

func snapModules(s *Snapshot, o Options) error {
	b, err := os.ReadFile(below(o, "/proc/modules"))
	if errors.Is(err, fs.ErrNotExist) {
		s.skip("kernel modules: no /proc/modules (a kernel without modules)")
		return nil
	} else if err != nil {
		return err
	}
	for line := range strings.Lines(string(b)) {
		if name, _, ok := strings.Cut(line, " "); ok {
			s.Items["module "+name] = ""
		}
	}
	return nil
}

// snapProcesses records the processes that carry Options.Mark in their
// environment and are not the caller's own ancestors.
func snapProcesses(s *Snapshot, o Options) error {
	if o.Mark == "" {
		s.skip("processes: no run mark given")
		return nil
	}
	self := o.Self
	if self == 0 {
		self = os.Getpid()
	}
	own := map[int]bool{}
	for pid := self; pid > 1 && !own[pid]; {
		own[pid] = true
		st, err := readStat(o, pid)
		if err != nil {
			break
		}
		pid = st.ppid
	}
	entries, err := os.ReadDir(below(o, "/proc"))
	if errors.Is(err, fs.ErrNotExist) {
		s.skip("processes: no /proc below %s", o.Root)
		return nil
	} else if err != nil {
		return err
	}
	unreadable := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		// PID 1 is the machine's (or container's) init, never the run's.
		if err != nil || own[pid] || pid == 1 {
			continue
		}
		env, err := os.ReadFile(below(o, fmt.Sprintf("/proc/%d/environ", pid)))
		if errors.Is(err, fs.ErrPermission) {
			unreadable++
			continue
		} else if err != nil {
			continue // gone, or a kernel thread
		}
		if !slices.Contains(strings.Split(string(env), "\x00"), o.Mark) {
			continue
		}
		st, err := readStat(o, pid)
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(below(o, fmt.Sprintf("/proc/%d/cmdline", pid)))
		cmd := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		if len(cmd) > 200 {
			cmd = cmd[:200] + "..."
		}
		s.Items[fmt.Sprintf("process %d %s", pid, st.comm)] = strconv.Quote(cmd)
	}
	if unreadable > 0 {
		s.skip("processes: %d environments unreadable", unreadable)
	}
	return nil
}

type procStat struct {
	comm string
	ppid int
}

// readStat reads /proc/PID/stat, whose command name may itself hold
// spaces and parentheses: it ends at the last ')'.
func readStat(o Options, pid int) (procStat, error) {
	b, err := os.ReadFile(below(o, fmt.Sprintf("/proc/%d/stat", pid)))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

func parseStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("stat: no command name in %q", line)
	}
	rest := strings.Fields(line[end+1:])
	if len(rest) < 2 {
		return procStat{}, fmt.Errorf("stat: no parent in %q", line)
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return procStat{}, fmt.Errorf("stat: parent %q: %w", rest[1], err)
	}
	return procStat{comm: line[open+1 : end], ppid: ppid}, nil
}
