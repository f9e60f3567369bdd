package ironic

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// rootfsFormat changes whenever the recipe below changes what a root
// filesystem holds, so an older entry is never taken for a newer one.
const rootfsFormat = "ironic-agent ironic rootfs 2"

// rootfsMaxAge is how long an entry nobody used is kept (each is about
// 400 MiB; a recipe change makes a new one).
const rootfsMaxAge = 7 * 24 * time.Hour

// RootFS is a Debian root filesystem (a newer Ironic, or what another
// Recipe installs), made with debootstrap and kept in the cache.
type RootFS struct {
	Series Series
	// Dir is the root filesystem. Tests never write into it: the services
	// run in a private mount namespace with their work directory bound in.
	Dir string
	// Versions are the installed versions of the packages Series runs.
	Versions map[string]string
	// Cached says the entry was already there; BuildTime is what building
	// it took when it was not.
	Cached    bool
	BuildTime time.Duration
	// SizeBytes is the disk use of the entry.
	SizeBytes int64
}

// rootfsMeta is an entry's meta.json, written last: its presence says the
// root filesystem is whole.
type rootfsMeta struct {
	cachedir.Stamp
	Series    Series
	Versions  map[string]string
	BuildTime time.Duration
	SizeBytes int64
}

// Recipe is a Debian root filesystem: debootstrap's minbase of Suite, then
// Packages installed with apt (no recommends, daemons not started, the host's
// debconf answers), then Finish. The Ironic series are recipes; so is the
// IPA ramdisk of internal/testbed/ipa.
type Recipe struct {
	// Name starts the cache entry's name (Name-key) and is hashed into the key.
	Name string
	// Suite is the Debian release, Script debootstrap's script for it.
	Suite, Script string
	// NoValidUntil: the suite's Release file is past its Valid-Until date.
	NoValidUntil bool
	Packages     []string
	// Finish, when set, runs on the installed tree before it is stored.
	// KeyExtra must change whenever what Finish does changes.
	Finish   func(ctx context.Context, dir string) error
	KeyExtra string
	// keyName, when set, is hashed instead of Name: the series always
	// hashed their String(), and their entries stay valid.
	keyName string
}

// recipe is series' root filesystem.
func (s Series) recipe() Recipe {
	info := s.info()
	return Recipe{Name: string(s), Suite: info.suite, Script: info.script, NoValidUntil: info.noValidUntil,
		Packages: s.packages(), Finish: fixParentNodePatch, keyName: s.String()}
}

// EnsureRootFS returns the root filesystem of series from the cache in
// cacheDir/ironic-rootfs, building it first if needed (EnsureDebianRoot).
func EnsureRootFS(ctx context.Context, series Series, cacheDir string) (*RootFS, error) {
	if series.info().suite == "" {
		return nil, fmt.Errorf("testbed ironic: series %s runs the host's packages, not a root filesystem", string(series))
	}
	r, err := EnsureDebianRoot(ctx, series.recipe(), cacheDir)
	if err != nil {
		return nil, err
	}
	r.Series = series
	return r, nil
}

// EnsureDebianRoot returns the root filesystem of rc from the cache in
// cacheDir/ironic-rootfs, building it first if needed. The key hashes the
// recipe: name, Debian suite and script, mirror, packages, debconf
// answers, apt options, KeyExtra. As with the ramdisk cache, parallel
// callers (go test runs e2e and e2e/vm at once) build it once: the first
// takes an flock on the key, builds into a temporary directory and renames
// it into place.
func EnsureDebianRoot(ctx context.Context, rc Recipe, cacheDir string) (*RootFS, error) {
	if rc.Name == "" || rc.Suite == "" || rc.Script == "" {
		return nil, fmt.Errorf("testbed ironic: root filesystem recipe %q needs a name, a suite and a debootstrap script", rc.Name)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("testbed ironic: building the %s root filesystem needs root (debootstrap, chroot)", rc.Name)
	}
	mirror, err := HostMirror("/etc/apt")
	if err != nil {
		return nil, err
	}
	key := rc.key(mirror)
	c := cachedir.Cache{Root: filepath.Join(cacheDir, "ironic-rootfs"), Meta: "ironictest-rootfs.json", MaxAge: rootfsMaxAge, MarkMeta: true}
	e, err := c.Ensure(ctx, rc.Name+"-"+key, key, func(ctx context.Context, tmp string) (cachedir.Stamper, error) {
		start := time.Now()
		if err := buildRootFS(ctx, rc, mirror, tmp); err != nil {
			return nil, err
		}
		if rc.Finish != nil {
			if err := rc.Finish(ctx, tmp); err != nil {
				return nil, err
			}
		}
		versions, err := rootfsVersions(ctx, tmp, rc.Packages)
		if err != nil {
			return nil, err
		}
		size, err := dirSize(tmp)
		if err != nil {
			return nil, err
		}
		return &rootfsMeta{Series: Series(rc.Name), Versions: versions, BuildTime: time.Since(start), SizeBytes: size}, nil
	})
	if err != nil {
		return nil, err
	}
	var m rootfsMeta
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return nil, fmt.Errorf("testbed ironic: rootfs %s: %w", e.Dir, err)
	}
	return &RootFS{Series: m.Series, Dir: e.Dir, Versions: m.Versions, Cached: !e.Built, BuildTime: m.BuildTime, SizeBytes: m.SizeBytes}, nil
}

// key hashes everything the root filesystem depends on. A recipe without
// KeyExtra hashes what the series' keys always did, so their cached
// entries stay valid.
func (rc Recipe) key(mirror string) string {
	name := rc.Name
	if rc.keyName != "" {
		name = rc.keyName
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n%v\n%s\n", rootfsFormat, name, rc.Suite, rc.Script, mirror,
		rc.Packages, debconfAnswers)
	fmt.Fprintf(h, "%s\n", strings.Join(rc.aptOptions(), " "))
	if rc.KeyExtra != "" {
		fmt.Fprintf(h, "%s\n", rc.KeyExtra)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// aptOptions are the options of every apt-get call inside the root
// filesystem.
func (rc Recipe) aptOptions() []string {
	opts := []string{"-o", "Dpkg::Use-Pty=0", "-o", "APT::Install-Recommends=false"}
	if rc.NoValidUntil {
		opts = append(opts, "-o", "Acquire::Check-Valid-Until=false")
	}
	return opts
}

// buildRootFS runs debootstrap into dir, then installs the recipe's packages
// inside with the same debconf answers as on the host. Everything runs in a
// private mount namespace (unshare), so the /proc, /sys and /dev mounts
// debootstrap and apt need vanish with it, on every exit path, even when
// the test is killed.
func buildRootFS(ctx context.Context, rc Recipe, mirror, dir string) error {
	script := filepath.Join("/usr/share/debootstrap/scripts", rc.Script)
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("testbed ironic: the %s root filesystem needs debootstrap (apt-get install debootstrap): %w", rc.Name, err)
	}
	boot := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "--",
		"debootstrap", "--variant=minbase", rc.Suite, dir, mirror, script)
	if err := runLogged(boot); err != nil {
		return fmt.Errorf("testbed ironic: debootstrap %s: %w", rc.Suite, err)
	}
	// Maintainer scripts must not start daemons (tftpd-hpa, xinetd, the
	// packaged ironic services): policy-rc.d inside the root filesystem.
	files := map[string]string{
		"usr/sbin/policy-rc.d":     "#!/bin/sh\nexit 101\n",
		"root/debconf-answers.txt": debconfAnswers,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			return fmt.Errorf("testbed ironic: rootfs: %w", err)
		}
	}
	// Where Services binds its work directory.
	if err := os.MkdirAll(filepath.Join(dir, chrootInner), 0o755); err != nil {
		return fmt.Errorf("testbed ironic: rootfs: %w", err)
	}
	// A copy into the root filesystem, for apt's name resolution there.
	if resolv, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		_ = os.Remove(filepath.Join(dir, "etc/resolv.conf"))
		if err := os.WriteFile(filepath.Join(dir, "etc/resolv.conf"), resolv, 0o644); err != nil {
			return fmt.Errorf("testbed ironic: rootfs: %w", err)
		}
	}
	apt := "apt-get " + strings.Join(rc.aptOptions(), " ")
	script2 := strings.Join([]string{
		"set -e",
		"debconf-set-selections /root/debconf-answers.txt",
		apt + " update -qq",
		apt + " install -y -qq " + strings.Join(rc.Packages, " "),
		"apt-get clean",
		"rm -rf /var/lib/apt/lists/*",
	}, "\n")
	install := chrootCommand(ctx, dir, "", "sh", "-c", script2)
	install.Env = append(install.Env, "DEBIAN_FRONTEND=noninteractive")
	if err := runLogged(install); err != nil {
		return fmt.Errorf("testbed ironic: installing %s in the %s root filesystem: %w", strings.Join(rc.Packages, " "), rc.Suite, err)
	}
	return nil
}

// parentNodeBug is the code of Debian's Ironic 29.0.5 and 35.0.1 that
// makes every node a PATCH touches its own parent: authorize_node_link_patch
// returns the node itself when the patch leaves parent_node alone, and the
// caller stores that node's UUID as parent_node. The node then drops out
// of every node listing that leaves children out, the conductor's periodic
// tasks included (ironic-inspector's PATCH during processing leaves an
// inspected node in "inspect wait" for good), and a power-off tries to
// power off the node as its own child under the lock it holds and fails
// (ChildNodeLocked).
const parentNodeBug = `        if parent_node := api_utils.authorize_node_link_patch(
                rpc_node, patch, 'parent_node'):
`

// parentNodeFix applies the link only when the patch names parent_node.
const parentNodeFix = `        if api_utils.get_patch_values(patch, '/parent_node') and (
                parent_node := api_utils.authorize_node_link_patch(
                    rpc_node, patch, 'parent_node')):
`

// fixParentNodePatch fixes parentNodeBug in root's Ironic (the test bed
// would otherwise test that bug, not the agent) and recompiles the module.
// A series without the bug is left alone.
func fixParentNodePatch(ctx context.Context, root string) error {
	const rel = "usr/lib/python3/dist-packages/ironic/api/controllers/v1/node.py"
	path := filepath.Join(root, rel)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("testbed ironic: rootfs: %w", err)
	}
	if !bytes.Contains(b, []byte(parentNodeBug)) {
		return nil
	}
	fixed := bytes.Replace(b, []byte(parentNodeBug), []byte(parentNodeFix), 1)
	if err := os.WriteFile(path, fixed, 0o644); err != nil {
		return fmt.Errorf("testbed ironic: rootfs: %w", err)
	}
	if err := runLogged(chrootCommand(ctx, root, "", "python3", "-m", "py_compile", "/"+rel)); err != nil {
		return fmt.Errorf("testbed ironic: recompiling the fixed %s: %w", rel, err)
	}
	return nil
}

// chrootInner is where a work directory is bound inside a root filesystem.
const chrootInner = "/srv/ironictest"

// chrootCommand runs argv chrooted into root, in a private mount namespace
// with /proc, /sys and /dev mounted and, when work is set, work bound at
// chrootInner. The mounts exist only in that namespace and go away with its
// last process, so no exit path can leave one on the host.
func chrootCommand(ctx context.Context, root, work string, argv ...string) *exec.Cmd {
	return chrootSysCommand(ctx, root, work, "", argv...)
}

// chrootSysCommand is chrootCommand with, when sys is set, the directory
// sys bound at /sys instead of the kernel's sysfs.
func chrootSysCommand(ctx context.Context, root, work, sys string, argv ...string) *exec.Cmd {
	setup := `set -e
r=$1; w=$2; s=$3; shift 3
mount -t proc proc "$r/proc"
if [ -n "$s" ]; then mount --bind "$s" "$r/sys"; else mount -t sysfs sysfs "$r/sys"; fi
mount --rbind /dev "$r/dev"
if [ -n "$w" ]; then mount --bind "$w" "$r` + chrootInner + `"; fi
exec chroot "$r" "$@"`
	args := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", setup, "sh", root, work, sys}, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	// The host's environment (GOFLAGS, a PATH into /root/go) means nothing
	// in the chroot; only test.sh's mark of the run's processes goes in,
	// so its host guard still finds a service left running.
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "HOME=/root"}
	if v, ok := os.LookupEnv("HOSTGUARD_RUN"); ok {
		cmd.Env = append(cmd.Env, "HOSTGUARD_RUN="+v)
	}
	return cmd
}

// RunInRoot runs argv chrooted into the root filesystem root (as
// chrootCommand, without a work directory), for a Recipe's Finish; the
// error carries the command's output.
func RunInRoot(ctx context.Context, root string, argv ...string) error {
	if err := runLogged(chrootCommand(ctx, root, "", argv...)); err != nil {
		return fmt.Errorf("testbed ironic: in %s: %w", root, err)
	}
	return nil
}

// OutputWithSys runs argv chrooted into the root filesystem root (as
// RunInRoot) with the directory sys bound at /sys instead of the kernel's
// sysfs, so a program of that Debian release (udevadm) reads a sysfs tree
// a test made or recorded; env is added to the command's environment. It
// returns the command's standard output; the error carries its standard
// error.
func OutputWithSys(ctx context.Context, root, sys string, env []string, argv ...string) ([]byte, error) {
	cmd := chrootSysCommand(ctx, root, "", sys, argv...)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("testbed ironic: in %s with /sys from %s: %s: %w: %s", root, sys, strings.Join(argv, " "), err, stderr.Bytes())
	}
	return out, nil
}

// rootfsVersions asks dpkg inside root for the installed versions of pkgs.
func rootfsVersions(ctx context.Context, root string, pkgs []string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "dpkg-query", append([]string{"--admindir", filepath.Join(root, "var/lib/dpkg"), "-W", "-f=${Package} ${Version}\n"}, pkgs...)...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testbed ironic: dpkg-query in %s: %w", root, err)
	}
	v := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if name, ver, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			v[name] = ver
		}
	}
	return v, nil
}

// dirSize is the disk use of the regular files below dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("testbed ironic: size of %s: %w", dir, err)
	}
	return n, nil
}

// HostMirror returns the Debian archive the host's apt uses (the first
// source of the main archive in etcApt's sources.list, sources.list.d/*.list
// or *.sources), so the root filesystems come from the same place as the
// host's packages.
func HostMirror(etcApt string) (string, error) {
	files := []string{filepath.Join(etcApt, "sources.list")}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(etcApt, "sources.list.d", pat))
		slices.Sort(m)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", fmt.Errorf("testbed ironic: reading apt sources: %w", err)
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorFromDeb822(bytes.NewReader(b))
		} else {
			uri = mirrorFromOneLine(bytes.NewReader(b))
		}
		if uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("testbed ironic: no Debian archive (a deb source of the main archive, not security or updates) in %s", strings.Join(files, ", "))
}

// mainArchive says whether a suite list names the main archive: a release
// without a suffix such as -security or -updates.
func mainArchive(suites []string) bool {
	return slices.ContainsFunc(suites, func(s string) bool { return s != "" && !strings.Contains(s, "-") && !strings.Contains(s, "/") })
}

// mirrorFromOneLine reads sources.list lines: deb [options] URI suite components.
func mirrorFromOneLine(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			// Options run to the field that ends in "]".
			i := slices.IndexFunc(f, func(s string) bool { return strings.HasSuffix(s, "]") })
			if i < 0 || i+2 >= len(f) {
				continue
			}
			f = f[i+1:]
		}
		if isArchiveURI(f[0]) && mainArchive(f[1:2]) {
			return f[0]
		}
	}
	return ""
}

// mirrorFromDeb822 reads deb822 stanzas (Types, URIs, Suites).
func mirrorFromDeb822(r io.Reader) string {
	sc := bufio.NewScanner(r)
	fields := map[string]string{}
	check := func() string {
		defer clear(fields)
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") {
			return ""
		}
		if !mainArchive(strings.Fields(fields["suites"])) {
			return ""
		}
		for u := range strings.FieldsSeq(fields["uris"]) {
			if isArchiveURI(u) {
				return u
			}
		}
		return ""
	}
	last := ""
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if u := check(); u != "" {
				return u
			}
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			fields[last] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = strings.ToLower(strings.TrimSpace(k))
		fields[last] = strings.TrimSpace(v)
	}
	return check()
}

func isArchiveURI(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "file:/")
}

// Installed is a series ready to Start.
type Installed struct {
	Series Series
	// RootFS is its root filesystem; empty for the host's 2023.1.
	RootFS string
	// Took is what installing the packages or building the root filesystem
	// took in this call: zero when they were present or cached.
	Took time.Duration
}

// Install makes series runnable: for 2023.1 the host's Debian packages
// (EnsurePackages), else its root filesystem from the cache below
// cachedir.Dir() (EnsureRootFS).
func Install(ctx context.Context, series Series) (*Installed, error) {
	in := &Installed{Series: series}
	if series.Host() {
		took, err := EnsurePackages(ctx)
		in.Took = took
		return in, err
	}
	cache, err := cachedir.Dir()
	if err != nil {
		return nil, err
	}
	rfs, err := EnsureRootFS(ctx, series, cache)
	if err != nil {
		return nil, err
	}
	in.RootFS = rfs.Dir
	if !rfs.Cached {
		in.Took = rfs.BuildTime
	}
	return in, nil
}

// Config returns c running this series.
func (in *Installed) Config(c Config) Config {
	c.Series, c.RootFS = in.Series, in.RootFS
	return c
}
