// Package initramfs writes Linux initramfs archives: the "newc" cpio format
// the kernel unpacks into its root file system before it runs /init.
//
// It is written in Go so building a ramdisk needs no root: device nodes such
// as /dev/console are plain header entries here, where cpio(1) would need a
// real node made with mknod.
package initramfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// File mode type bits, as stored in the newc header (they match stat(2)).
const (
	ModeDir     = 0o040000
	ModeRegular = 0o100000
	ModeSymlink = 0o120000
	ModeCharDev = 0o020000
)

const trailer = "TRAILER!!!"

// Writer writes one newc archive. Entries are written in the order they are
// added; the kernel creates them in that order, so parents must come first
// (Writer adds missing parent directories itself).
type Writer struct {
	w    *bufio.Writer
	ino  uint32
	dirs map[string]bool
	err  error
}

// NewWriter returns a Writer that writes the archive to w. Call Close to
// write the trailer and flush.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 1<<20), ino: 1, dirs: map[string]bool{"": true, ".": true}}
}

// Header is one archive entry.
type Header struct {
	Name  string // path inside the archive, without a leading "/"
	Mode  uint32 // type bits | permission bits
	Size  int64  // data length (regular files and symlink targets)
	Major uint32 // device major number (character devices)
	Minor uint32 // device minor number (character devices)
}

func clean(name string) (string, error) {
	n := strings.TrimPrefix(path.Clean("/"+name), "/")
	if n == "" || n == trailer {
		return "", fmt.Errorf("initramfs: bad entry name %q", name)
	}
	return n, nil
}

func (w *Writer) header(h Header) error {
	if w.err != nil {
		return w.err
	}
	name := h.Name
	w.ino++
	nlink := 1
	if h.Mode&0o170000 == ModeDir {
		nlink = 2
	}
	// newc: magic, then 13 fields of 8 hex digits; mtime 0 keeps the
	// archive reproducible.
	_, err := fmt.Fprintf(w.w, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		w.ino, h.Mode, 0, 0, nlink, 0, uint32(h.Size), 0, 0, h.Major, h.Minor, len(name)+1, 0)
	if err == nil {
		_, err = io.WriteString(w.w, name+"\x00")
	}
	if err == nil {
		err = w.pad(110 + int64(len(name)) + 1)
	}
	w.err = err
	return err
}

func (w *Writer) pad(n int64) error {
	if r := n % 4; r != 0 {
		_, err := w.w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

// mkparents adds the directories above name that are not in the archive yet.
func (w *Writer) mkparents(name string) error {
	dir := path.Dir(name)
	if w.dirs[dir] {
		return nil
	}
	if err := w.mkparents(dir); err != nil {
		return err
	}
	w.dirs[dir] = true
	return w.header(Header{Name: dir, Mode: ModeDir | 0o755})
}

// Dir adds a directory.
func (w *Writer) Dir(name string, perm uint32) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if w.dirs[n] {
		return nil
	}
	if err := w.mkparents(n); err != nil {
		return err
	}
	w.dirs[n] = true
	return w.header(Header{Name: n, Mode: ModeDir | perm&0o7777})
}

// File adds a regular file of size bytes read from r.
func (w *Writer) File(name string, perm uint32, size int64, r io.Reader) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if size < 0 || size > 1<<32-1 {
		return fmt.Errorf("initramfs: %s: size %d does not fit a newc header", n, size)
	}
	if err := w.mkparents(n); err != nil {
		return err
	}
	if err := w.header(Header{Name: n, Mode: ModeRegular | perm&0o7777, Size: size}); err != nil {
		return err
	}
	c, err := io.CopyN(w.w, r, size)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("initramfs: %s: short read: %d of %d bytes", n, c, size)
		}
		w.err = err
		return err
	}
	w.err = w.pad(size)
	return w.err
}

// Bytes adds a regular file holding b.
func (w *Writer) Bytes(name string, perm uint32, b []byte) error {
	return w.File(name, perm, int64(len(b)), strings.NewReader(string(b)))
}

// Symlink adds a symbolic link name -> target.
func (w *Writer) Symlink(name, target string) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if target == "" {
		return fmt.Errorf("initramfs: %s: empty symlink target", n)
	}
	if err := w.mkparents(n); err != nil {
		return err
	}
	if err := w.header(Header{Name: n, Mode: ModeSymlink | 0o777, Size: int64(len(target))}); err != nil {
		return err
	}
	if _, err := io.WriteString(w.w, target); err != nil {
		w.err = err
		return err
	}
	w.err = w.pad(int64(len(target)))
	return w.err
}

// CharDev adds a character device node (the kernel creates it on unpack,
// which is how /dev/console exists before devtmpfs is mounted).
func (w *Writer) CharDev(name string, perm, major, minor uint32) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if err := w.mkparents(n); err != nil {
		return err
	}
	return w.header(Header{Name: n, Mode: ModeCharDev | perm&0o7777, Major: major, Minor: minor})
}

// Flush writes what is buffered to the underlying writer, so what it has
// received accounts for every entry added so far.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// Close writes the trailer entry and flushes. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.header(Header{Name: trailer}); err != nil {
		return err
	}
	return w.w.Flush()
}

// ReadNames returns the entry names of the newc archive r, in order,
// reading to its trailer. It is the reading half a tool needs to see
// what an archive holds, not an extractor.
func ReadNames(r io.Reader) ([]string, error) {
	br := bufio.NewReader(r)
	var names []string
	var off int64
	for {
		var h [110]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return nil, fmt.Errorf("initramfs: header at offset %d: %w", off, err)
		}
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("initramfs: header at offset %d: magic %q is not newc's 070701", off, h[:6])
		}
		field := func(i int) (int64, error) {
			var v int64
			if _, err := fmt.Sscanf(string(h[6+8*i:6+8*i+8]), "%08x", &v); err != nil {
				return 0, fmt.Errorf("initramfs: header at offset %d: field %d: %w", off, i, err)
			}
			return v, nil
		}
		size, err := field(6)
		if err != nil {
			return nil, err
		}
		nameSize, err := field(11)
		if err != nil {
			return nil, err
		}
		if nameSize < 1 || nameSize > 4096 {
			return nil, fmt.Errorf("initramfs: header at offset %d: name size %d", off, nameSize)
		}
		name := make([]byte, nameSize)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, fmt.Errorf("initramfs: name at offset %d: %w", off, err)
		}
		n := strings.TrimRight(string(name), "\x00")
		off += 110 + nameSize
		skip := (4 - off%4) % 4
		off += skip
		pad := (4 - size%4) % 4
		if _, err := br.Discard(int(skip)); err != nil {
			return nil, fmt.Errorf("initramfs: %s: %w", n, err)
		}
		if n == trailer {
			return names, nil
		}
		if _, err := io.CopyN(io.Discard, br, size+pad); err != nil {
			return nil, fmt.Errorf("initramfs: %s: data: %w", n, err)
		}
		off += size + pad
		names = append(names, n)
	}
}

// HostFile adds the host file src as name with permission bits perm,
// to which the execute bits are added when src is executable and perm
// has none.
func (w *Writer) HostFile(name, src string, perm uint32) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if perm&0o111 == 0 && st.Mode()&0o111 != 0 {
		perm |= 0o111
	}
	if err := w.File(name, perm, st.Size(), f); err != nil {
		return fmt.Errorf("initramfs: add %s: %w", src, err)
	}
	return nil
}
