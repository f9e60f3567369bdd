package collector

import (
	"encoding/hex"
	"fmt"
	"github.com/ironic-go/ironic-agent/collector/internal/vpdtest"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// fsTree describes a small machine tree (sysfs, udev data, /dev links) as
// the kernel lays it out, for hand-made disk fixtures. Paths are
// root-relative with slashes; link targets are root-relative too and become
// relative symlinks, as sysfs's are.
type fsTree struct {
	files map[string][]byte
	links map[string]string
	dirs  map[string]bool
}

func newTree() *fsTree {
	return &fsTree{files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{}}
}

func (tr *fsTree) file(p string, content any) {
	switch c := content.(type) {
	case string:
		tr.files[p] = []byte(c)
	case []byte:
		tr.files[p] = c
	default:
		panic(fmt.Sprintf("file %s: content %T", p, content))
	}
}

// attr writes a sysfs text attribute (value plus newline).
func (tr *fsTree) attr(p string, v any) { tr.file(p, fmt.Sprintf("%v\n", v)) }

func (tr *fsTree) dir(p string) { tr.dirs[p] = true }

// link makes p a relative symlink to the root-relative target.
//
// Like sysfs, a link to an ancestor still ends in the target's name
// ("device -> ../../../3:0:0:0", never "../.."): lsblk takes the hctl from
// that last component.
func (tr *fsTree) link(p, target string) {
	from := path.Dir(p)
	rel, err := filepath.Rel(from, target)
	if err != nil {
		panic(err)
	}
	if from == target || strings.HasPrefix(from, target+"/") {
		up, _ := filepath.Rel(from, path.Dir(target))
		rel = up + "/" + path.Base(target)
	}
	tr.links[p] = filepath.ToSlash(rel)
}

// rawLink makes p a symlink with the target exactly as given.
func (tr *fsTree) rawLink(p, target string) { tr.links[p] = target }

// write creates the tree below dir.
func (tr *fsTree) write(dir string) error {
	var dirs []string
	for d := range tr.dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for p, b := range tr.files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	for p, t := range tr.links {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(t, full); err != nil {
			return err
		}
	}
	return nil
}

// device marks p as a device of the given bus or class (its subsystem
// link).
func (tr *fsTree) device(p, subsys string) string {
	tr.dir(p)
	if subsys != "" {
		tr.link(p+"/subsystem", subsys)
	}
	return p
}

type blockSpec struct {
	devno      string
	bytes      int64
	rotational int
	logical    int
	physical   int
}

// block adds a block device directory dir (its name is the kernel name),
// the /sys/block and /sys/class/block links, and a "device" link when
// parent is not empty.
func (tr *fsTree) block(dir, parent string, s blockSpec) string {
	name := path.Base(dir)
	tr.device(dir, "sys/class/block")
	tr.attr(dir+"/dev", s.devno)
	tr.attr(dir+"/size", s.bytes/512)
	tr.attr(dir+"/hidden", 0)
	tr.attr(dir+"/removable", 0)
	tr.attr(dir+"/ro", 0)
	if s.logical == 0 {
		s.logical, s.physical = 512, 512
	}
	tr.attr(dir+"/queue/rotational", s.rotational)
	tr.attr(dir+"/queue/logical_block_size", s.logical)
	tr.attr(dir+"/queue/physical_block_size", s.physical)
	tr.dir(dir + "/holders")
	tr.dir(dir + "/slaves")
	tr.link("sys/block/"+name, dir)
	tr.link("sys/dev/block/"+s.devno, dir)
	tr.link("sys/class/block/"+name, dir)
	if parent != "" {
		tr.link(dir+"/device", parent)
	}
	return dir
}

// scsiHost adds SCSI host hostN below parent with its scsi_host class
// device (proc_name is the driver's name, as lsblk's TRAN reads it).
func (tr *fsTree) scsiHost(parent string, n int, procName string) string {
	h := tr.device(fmt.Sprintf("%s/host%d", parent, n), "sys/bus/scsi")
	cls := fmt.Sprintf("%s/scsi_host/host%d", h, n)
	tr.device(cls, "sys/class/scsi_host")
	tr.attr(cls+"/proc_name", procName)
	tr.link(fmt.Sprintf("sys/class/scsi_host/host%d", n), cls)
	return h
}

type scsiSpec struct {
	hctl   string
	typ    int
	vendor string // padded to 8 as the kernel prints INQUIRY data
	model  string // padded to 16
	rev    string
	vpd80  []byte
	vpd83  []byte
	vpd89  []byte
	wwid   string
}

// scsiDevice adds target and LUN below targetParent (a host, rport or
// end device) and returns the SCSI device directory.
func (tr *fsTree) scsiDevice(targetParent string, s scsiSpec) string {
	hctl := strings.Split(s.hctl, ":")
	tgt := tr.device(fmt.Sprintf("%s/target%s:%s:%s", targetParent, hctl[0], hctl[1], hctl[2]), "sys/bus/scsi")
	d := tr.device(tgt+"/"+s.hctl, "sys/bus/scsi")
	tr.attr(d+"/type", s.typ)
	tr.attr(d+"/vendor", vpdtest.Pad(s.vendor, 8))
	tr.attr(d+"/model", vpdtest.Pad(s.model, 16))
	tr.attr(d+"/rev", s.rev)
	tr.attr(d+"/scsi_level", 6)
	for name, page := range map[string][]byte{"vpd_pg80": s.vpd80, "vpd_pg83": s.vpd83, "vpd_pg89": s.vpd89} {
		if page != nil {
			tr.file(d+"/"+name, page)
		}
	}
	if s.wwid != "" {
		tr.attr(d+"/wwid", s.wwid)
	}
	tr.device(d+"/scsi_device/"+s.hctl, "sys/class/scsi_device")
	tr.link("sys/bus/scsi/devices/"+s.hctl, d)
	return d
}

// udev writes a udev database record and the by-path links it names.
func (tr *fsTree) udev(devno, kname string, lines ...string) {
	tr.file("run/udev/data/b"+devno, strings.Join(lines, "\n")+"\n")
	for _, l := range lines {
		if p, ok := strings.CutPrefix(l, "S:disk/by-path/"); ok {
			tr.rawLink("dev/disk/by-path/"+p, "../../"+kname)
		}
	}
}

// NAA and ASCII designators for VPD page 0x83.
func naaDesig(hexID string) []byte {
	b, _ := hex.DecodeString(hexID)
	return append([]byte{0x01, 0x03, 0x00, byte(len(b))}, b...)
}

func asciiDesig(typ byte, s string) []byte {
	return append([]byte{0x02, typ, 0x00, byte(len(s))}, s...)
}

func vpd83(desigs ...[]byte) []byte {
	var p []byte
	for _, d := range desigs {
		p = append(p, d...)
	}
	return vpdtest.Page(0x83, p)
}

const mib = 1 << 20
