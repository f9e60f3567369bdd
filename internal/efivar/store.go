package efivar

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// GlobalVariable is EFI_GLOBAL_VARIABLE, the vendor GUID of Boot#### and
// BootOrder, as efivarfs spells it in file names.
const GlobalVariable = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// Variable attributes (UEFI 2.10 section 8.2).
const (
	NonVolatile       = 0x00000001
	BootServiceAccess = 0x00000002
	RuntimeAccess     = 0x00000004
	// BootVarAttributes are those of Boot#### and BootOrder: kept across
	// power cycles, seen by the firmware and by the OS.
	BootVarAttributes = NonVolatile | BootServiceAccess | RuntimeAccess
)

// DefaultDir is where Linux mounts efivarfs.
const DefaultDir = "/sys/firmware/efi/efivars"

// Store is an efivarfs mount (or, in tests, a directory laid out like one).
type Store struct {
	Dir string
}

func (s Store) path(name string) string { return filepath.Join(s.Dir, name+"-"+GlobalVariable) }

// Get reads a global variable: its attributes and value.
func (s Store) Get(name string) (uint32, []byte, error) {
	b, err := os.ReadFile(s.path(name))
	if err != nil {
		return 0, nil, fmt.Errorf("efivar: read %s: %w", name, err)
	}
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("efivar: %s: %d bytes, shorter than its attributes", s.path(name), len(b))
	}
	return binary.LittleEndian.Uint32(b), b[4:], nil
}

// Set writes a global variable as libefivar does: clear the immutable flag
// efivarfs may carry (and put it back after), then write attributes and
// value in one write(2), which efivarfs turns into one SetVariable() call.
func (s Store) Set(name string, attrs uint32, data []byte) (err error) {
	p := s.path(name)
	buf := binary.LittleEndian.AppendUint32(nil, attrs)
	buf = append(buf, data...)
	var rf, f *os.File
	restore := func() error { return nil }
	defer func() {
		if rerr := restore(); err == nil && rerr != nil {
			err = fmt.Errorf("efivar: %s: %w", p, rerr)
		}
		if f != nil {
			f.Close()
		}
		if rf != nil {
			rf.Close()
		}
	}()
	flags := os.O_WRONLY
	rf, err = os.Open(p)
	switch {
	case err == nil:
		if restore, err = makeMutable(rf); err != nil {
			return fmt.Errorf("efivar: %s: %w", p, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		flags |= os.O_CREATE | os.O_EXCL
	default:
		return fmt.Errorf("efivar: %w", err)
	}
	if f, err = os.OpenFile(p, flags, 0o644); err != nil {
		return fmt.Errorf("efivar: %w", err)
	}
	if rf == nil {
		// A variable the kernel does not know as removable is created
		// immutable; the write below would then fail.
		if restore, err = makeMutable(f); err != nil {
			return fmt.Errorf("efivar: %s: %w", p, err)
		}
	}
	n, err := f.Write(buf)
	if err != nil {
		return fmt.Errorf("efivar: write %s (%d bytes): %w", p, len(buf), err)
	}
	if n != len(buf) {
		return fmt.Errorf("efivar: write %s: %d of %d bytes written", p, n, len(buf))
	}
	// On efivarfs the write replaced the whole variable and the file's
	// size is now that of buf; a plain file (a test's fake efivars) keeps
	// the old tail of a longer value, which this cuts.
	if st, err := f.Stat(); err == nil && st.Size() > int64(len(buf)) {
		if err := f.Truncate(int64(len(buf))); err != nil {
			return fmt.Errorf("efivar: %w", err)
		}
	}
	return nil
}

// Delete removes a global variable (clearing its immutable flag first);
// one that does not exist is no error.
func (s Store) Delete(name string) error {
	p := s.path(name)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("efivar: %w", err)
	}
	_, err = makeMutable(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("efivar: %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("efivar: delete %s: %w", name, err)
	}
	return nil
}

// fsImmutable is FS_IMMUTABLE_FL of <linux/fs.h> (chattr +i), which
// golang.org/x/sys/unix does not define.
const fsImmutable = 0x00000010

// makeMutable clears FS_IMMUTABLE_FL on f (chattr -i) and returns a
// function that sets it again if it was set. File systems without inode
// flags (ENOTTY, EOPNOTSUPP: a test's tmpfs) have nothing to clear.
func makeMutable(f *os.File) (func() error, error) {
	fd := int(f.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return func() error { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("FS_IOC_GETFLAGS: %w", err)
	}
	if flags&fsImmutable == 0 {
		return func() error { return nil }, nil
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags&^fsImmutable)); err != nil {
		return nil, fmt.Errorf("clear the immutable flag (FS_IOC_SETFLAGS): %w", err)
	}
	return func() error {
		if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
			return fmt.Errorf("restore the immutable flag (FS_IOC_SETFLAGS): %w", err)
		}
		return nil
	}, nil
}

// BootOrder reads BootOrder; a machine without one has an empty order.
func (s Store) BootOrder() ([]uint16, error) {
	_, b, err := s.Get("BootOrder")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("efivar: BootOrder has an odd length (%d bytes)", len(b))
	}
	order := make([]uint16, len(b)/2)
	for i := range order {
		order[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return order, nil
}

// SetBootOrder writes BootOrder.
func (s Store) SetBootOrder(order []uint16) error {
	var b []byte
	for _, n := range order {
		b = binary.LittleEndian.AppendUint16(b, n)
	}
	return s.Set("BootOrder", BootVarAttributes, b)
}

// BootEntry is one Boot#### variable; Option is nil (and Err says why) when
// its value is no valid load option.
type BootEntry struct {
	Num    uint16
	Option *LoadOption
	Err    error
}

// BootName is the variable name of boot entry n (hex digits upper case, as
// UEFI 2.10 section 3.3 writes them).
func BootName(n uint16) string { return fmt.Sprintf("Boot%04X", n) }

// BootEntries lists the Boot#### variables in number order.
func (s Store) BootEntries() ([]BootEntry, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("efivar: %w", err)
	}
	var out []BootEntry
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), "-"+GlobalVariable)
		if !ok || len(name) != 8 || !strings.HasPrefix(name, "Boot") {
			continue
		}
		n, err := strconv.ParseUint(name[4:], 16, 16)
		if err != nil {
			continue // BootOrder, BootNext, BootCurrent
		}
		e := BootEntry{Num: uint16(n)}
		if _, b, err := s.Get(name); err != nil {
			e.Err = err
		} else if e.Option, err = ParseLoadOption(b); err != nil {
			e.Err = err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b BootEntry) int { return int(a.Num) - int(b.Num) })
	return out, nil
}

// ReplaceBootOption adds opt as a boot entry at the head of BootOrder after
// removing the entries replace selects, which is what `efibootmgr -b N -B`
// for each of them followed by `efibootmgr -c` does: the new entry takes the
// lowest free number (so usually that of the entry it replaces), BootOrder
// loses the removed numbers and starts with the new one. The new entry is
// written before anything is removed, so a failure part-way never leaves
// the machine with less to boot than before.
func (s Store) ReplaceBootOption(ctx context.Context, opt LoadOption, replace func(BootEntry) bool) (uint16, error) {
	val, err := opt.MarshalBinary()
	if err != nil {
		return 0, err
	}
	entries, err := s.BootEntries()
	if err != nil {
		return 0, err
	}
	used := map[uint16]bool{}
	var removed []uint16
	for _, e := range entries {
		if e.Option != nil && replace(e) {
			removed = append(removed, e.Num)
			continue
		}
		used[e.Num] = true
	}
	num := -1
	for n := 0; n <= 0xffff; n++ {
		if !used[uint16(n)] {
			num = n
			break
		}
	}
	if num < 0 {
		return 0, errors.New("efivar: all 65536 boot entry numbers are taken")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.Set(BootName(uint16(num)), BootVarAttributes, val); err != nil {
		return 0, err
	}
	order, err := s.BootOrder()
	if err != nil {
		return 0, err
	}
	newOrder := []uint16{uint16(num)}
	for _, n := range order {
		if n != uint16(num) && !slices.Contains(removed, n) {
			newOrder = append(newOrder, n)
		}
	}
	if err := s.SetBootOrder(newOrder); err != nil {
		return 0, err
	}
	for _, n := range removed {
		if n == uint16(num) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := s.Delete(BootName(n)); err != nil {
			return 0, err
		}
	}
	return uint16(num), nil
}
