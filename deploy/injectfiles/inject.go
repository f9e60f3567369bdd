package injectfiles

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/logging"
	"github.com/ironic-go/ironic-agent/internal/pyconv"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// Injector writes files onto the partitions of one disk.
type Injector struct {
	// Guard must allow every partition mounted (the agent's allowed
	// devices; a mounted or in-use device is always refused).
	Guard *blockdev.Guard
	// RootDevice is the install disk (IPA's get_os_install_device): the
	// disk of numbered partitions and the one searched by path.
	RootDevice string
	// Disks are searched for a UUID=, LABEL=, PARTUUID= or PARTLABEL=
	// specifier (the agent's disks; mount(8) would search every device).
	Disks []string
	// HTTP fetches URL contents.
	HTTP *http.Client
	// Mount and Unmount default to mount(2) and umount(2).
	Mount   func(source, target, fstype string, flags uintptr, data string) error
	Unmount func(target string) error
	Log     *slog.Logger
}

// Inject processes files in order, as IPA's inject_files does; node and
// ports fill URL templates.
func (in *Injector) Inject(ctx context.Context, files []File, node map[string]any, ports []any) error {
	in.Log = logging.OrDiscard(in.Log)
	if in.Mount == nil {
		in.Mount = unix.Mount
	}
	if in.Unmount == nil {
		in.Unmount = func(target string) error { return unix.Unmount(target, 0) }
	}
	if len(files) == 0 {
		in.Log.Info("no files to inject")
		return nil
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := in.injectOne(ctx, f, node, ports); err != nil {
			return err
		}
	}
	return nil
}

// injectOne finds and mounts f's partition, then writes or deletes f.
func (in *Injector) injectOne(ctx context.Context, f File, node map[string]any, ports []any) error {
	rel := path.Clean(strings.Trim(f.Path, "/"))
	var dev, sub string
	var err error
	if f.Partition != nil {
		dev, err = in.partitionDevice(f.Partition)
		if err != nil {
			return err
		}
		sub = rel
	} else {
		top, rest, ok := strings.Cut(rel, "/")
		if !ok {
			return ipaerror.InvalidCommandParams("Invalid path %s, must be an absolute path to a file", rel)
		}
		dev, err = in.findPartitionWithDir(ctx, top)
		if err != nil {
			return err
		}
		in.Log.Info("inject_files: path found on partition", "path", top, "partition", dev)
		sub = top + "/" + rest
	}
	return in.withMounted(dev, func(dir string) error {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return err
		}
		defer root.Close()
		if f.Deleted {
			// IPA's unlink_without_raise: a file already gone is fine.
			if err := root.Remove(sub); err != nil && !errors.Is(err, fs.ErrNotExist) {
				in.Log.Warn("inject_files: could not delete the file", "path", f.Path, "partition", dev, "error", err)
			}
			return nil
		}
		if err := in.writeFile(ctx, root, sub, f, node, ports); err != nil {
			return ipaerror.Wrap("CommandExecutionError", 500, "Command execution failed",
				fmt.Sprintf("Failed to process file %s on %s: %v", f, dev, err), err)
		}
		in.Log.Info("inject_files: file written", "path", f.Path, "partition", dev)
		return nil
	})
}

// writeFile creates sub's directory (dirmode on the leaf directory when it
// was created), writes the content, then applies mode and ownership. The
// os.Root keeps every step inside the mounted filesystem, symbolic links
// included.
func (in *Injector) writeFile(ctx context.Context, root *os.Root, sub string, f File, node map[string]any, ports []any) error {
	dir := path.Dir(sub)
	if _, err := root.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := root.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		// chmod, not the mkdir mode, so the umask does not count (IPA).
		if f.DirMode != 0 {
			if err := root.Chmod(dir, fs.FileMode(f.DirMode)&fs.ModePerm|unixSpecial(f.DirMode)); err != nil {
				return err
			}
		}
	}
	if f.Content == nil {
		return errors.New("no content")
	}
	out, err := root.OpenFile(sub, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if strings.Contains(*f.Content, "://") {
		err = in.download(ctx, out, *f.Content, node, ports)
	} else {
		var data []byte
		if data, err = decodeBase64(*f.Content); err == nil {
			_, err = out.Write(data)
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if f.Mode != 0 {
		if err := root.Chmod(sub, fs.FileMode(f.Mode)&fs.ModePerm|unixSpecial(f.Mode)); err != nil {
			return err
		}
	}
	if f.Owner != nil || f.Group != nil {
		uid, gid := -1, -1
		if f.Owner != nil {
			uid = *f.Owner
		}
		if f.Group != nil {
			gid = *f.Group
		}
		if err := root.Lchown(sub, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// unixSpecial maps the setuid, setgid and sticky bits of a chmod value to
// Go's mode bits.
func unixSpecial(m int) fs.FileMode {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// decodeBase64 is Python's base64.b64decode: characters outside the
// alphabet are dropped before decoding, the padding must be right.
func decodeBase64(s string) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '+', r == '/', r == '=':
			return r
		}
		return -1
	}, s)
	b, err := base64.StdEncoding.DecodeString(clean)
	if err != nil {
		return nil, fmt.Errorf("content is not base64: %w", err)
	}
	return b, nil
}

// download streams a URL content (its template filled from node and
// ports) into out.
func (in *Injector) download(ctx context.Context, out io.Writer, tmpl string, node map[string]any, ports []any) error {
	url, err := FormatURL(tmpl, node, ports)
	if err != nil {
		return err
	}
	client := in.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// partitionDevice resolves a partition specifier: a number (a partition
// of the root device; Python's int() of the value), a device path, or a
// mount(8) tag (UUID=, LABEL=, PARTUUID=, PARTLABEL=) looked up on the
// disks.
func (in *Injector) partitionDevice(spec any) (string, error) {
	if n, err := pyconv.Int(spec); err == nil {
		if n <= 0 {
			return "", ipaerror.InvalidCommandParams("partition %d: partition numbers start at 1", n)
		}
		return blockdev.PartitionPath(in.RootDevice, int(n)), nil
	}
	s, ok := spec.(string)
	if !ok {
		return "", ipaerror.InvalidCommandParams("partition %s: not a number, device or UUID/label", pyconv.Repr(spec))
	}
	if strings.HasPrefix(s, "/") {
		return s, nil
	}
	tag, value, ok := strings.Cut(s, "=")
	if !ok || value == "" {
		return "", ipaerror.InvalidCommandParams("partition %q: not a number, a device path or TAG=value (UUID, LABEL, PARTUUID, PARTLABEL)", s)
	}
	value = strings.Trim(value, `"`)
	for _, disk := range in.Disks {
		if p := findTagged(disk, strings.ToUpper(tag), value); p != "" {
			return p, nil
		}
	}
	return "", ipaerror.New("DeviceNotFound", 404, "Error finding the disk or partition device to deploy the image onto",
		fmt.Sprintf("no partition with %s found on %s", s, strings.Join(in.Disks, ", ")))
}

// findPartitionWithDir is IPA's find_partition_with_path: mount each
// partition of the root device in table order (LVM and extended ones
// skipped) and take the first holding the directory top.
func (in *Injector) findPartitionWithDir(ctx context.Context, top string) (string, error) {
	t, err := blockdev.ReadPartTable(in.RootDevice, sectorSize(in.RootDevice))
	if err != nil {
		return "", fmt.Errorf("inject_files: partitions of %s: %w", in.RootDevice, err)
	}
	var scanned []string
	for _, p := range t.Partitions {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if p.Size <= 0 || isLVM(p) || (t.Kind == "dos" && (p.MBRType == 0x05 || p.MBRType == 0x0f || p.MBRType == 0x85)) {
			continue
		}
		dev := blockdev.PartitionPath(in.RootDevice, p.Number)
		scanned = append(scanned, dev)
		found := false
		err := in.withMounted(dev, func(dir string) error {
			st, err := os.Stat(path.Join(dir, top))
			found = err == nil && st.IsDir()
			return nil
		})
		if err != nil {
			in.Log.Warn("inject_files: failure when inspecting partition", "partition", dev, "error", err)
			continue
		}
		if found {
			return dev, nil
		}
	}
	return "", ipaerror.New("DeviceNotFound", 404, "Error finding the disk or partition device to deploy the image onto",
		fmt.Sprintf("No partition found with path %s, scanned: %s", top, strings.Join(scanned, ", ")))
}

func isLVM(p blockdev.PartEntry) bool {
	return p.MBRType == 0x8e || p.TypeGUID == "e6d6d379-f507-44c2-a23c-238f2a3df928"
}

// withMounted mounts dev on a fresh directory, runs fn, and unmounts
// whatever fn returned (three attempts a second apart for a busy mount, as
// IPA's mounted()); the directory is removed only once unmounted.
func (in *Injector) withMounted(dev string, fn func(dir string) error) (err error) {
	if err := in.Guard.Check(dev); err != nil {
		return err
	}
	fstype, err := blockdev.FSType(dev)
	if err != nil {
		return fmt.Errorf("probe %s: %w", dev, err)
	}
	switch fstype {
	case "", "swap":
		return fmt.Errorf("mount %s: no filesystem recognised (ext2/3/4, XFS, btrfs, FAT, ISO9660)", dev)
	}
	dir, err := os.MkdirTemp("", "ironic-agent-inject-")
	if err != nil {
		return err
	}
	if err := in.Mount(dev, dir, fstype, unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("mount %s (%s) on %s: %w", dev, fstype, dir, err)
	}
	defer func() {
		var uerr error
		for attempt := 0; attempt < 3; attempt++ {
			if uerr = in.Unmount(dir); uerr == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if uerr != nil {
			in.Log.Warn("unable to unmount the temporary mount point", "partition", dev, "dir", dir, "error", uerr)
			if err == nil {
				err = fmt.Errorf("unmount %s from %s: %w", dev, dir, uerr)
			}
			return
		}
		_ = os.Remove(dir)
	}()
	return fn(dir)
}
