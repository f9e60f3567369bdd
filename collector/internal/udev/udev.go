// Package udev computes, from sysfs alone, the block-device properties
// udev's rules store (scsi_id, ata_id, usb_id, the path_id builtin,
// kpartx_id) and reads udev's own database records, so the disk
// collector reports the same values on a ramdisk without udevd. The string
// clean-ups of udev and util-linux (lsblk) that turn those properties into
// the text IPA reports live here too.
package udev

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Record is one device's entry in the udev database
// (/run/udev/data/b<major>:<minor>): its properties (E: lines) and the
// symlinks udev created for it below /dev (S: lines).
type Record struct {
	Props    map[string]string
	Symlinks []string
}

// maxUdevRecord bounds what we accept as one udev database file; real ones
// are a few KiB.
const maxUdevRecord = 1 << 20

// ParseRecord decodes a udev database file. The format is one
// "<letter>:<text>" entry per line (systemd's device_read_db); only E:
// (property KEY=VALUE) and S: (symlink below /dev) matter here, the others
// (I:, G:, Q:, V:, L:, W:) are accepted and ignored. Anything else (a NUL
// byte, a line without the "<letter>:" prefix, a property without "=" or
// with an empty key) makes the whole record garbled: the caller then derives
// the values from sysfs instead of trusting half a record.
func ParseRecord(data []byte) (Record, error) {
	rec := Record{Props: map[string]string{}}
	if len(data) > maxUdevRecord {
		return rec, fmt.Errorf("%d bytes, more than the %d a udev record can have", len(data), maxUdevRecord)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return rec, fmt.Errorf("NUL byte at offset %d", i)
	}
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		if len(line) < 2 || line[1] != ':' {
			return rec, fmt.Errorf("line %d: %q is not a <letter>:<value> entry", n+1, truncate(line, 40))
		}
		val := line[2:]
		switch line[0] {
		case 'E':
			k, v, ok := strings.Cut(val, "=")
			if !ok || k == "" {
				return rec, fmt.Errorf("line %d: property %q has no KEY=VALUE form", n+1, truncate(val, 40))
			}
			rec.Props[k] = v
		case 'S':
			if val == "" {
				return rec, fmt.Errorf("line %d: empty symlink entry", n+1)
			}
			rec.Symlinks = append(rec.Symlinks, val)
		}
	}
	return rec, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// The helpers below reproduce the string clean-ups of the programs whose
// output IPA reports, so values derived from sysfs come out byte-for-byte as
// udev and lsblk would have printed them.

// NormalizeWhitespace is util-linux's normalize_whitespace (lsblk applies it
// to MODEL and SERIAL): leading and trailing whitespace removed, and of each
// inner run of whitespace only its first character kept.
func NormalizeWhitespace(s string) string {
	var b strings.Builder
	nsp, intext := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isCSpace(c) {
			nsp++
		} else {
			nsp, intext = 0, true
		}
		if nsp > 1 || (nsp > 0 && !intext) {
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	if nsp > 0 && len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// ReplaceWhitespace is systemd's util_replace_whitespace (used by
// scsi_id and ata_id for serials): trims both ends and turns each inner run
// of whitespace into one '_'.
func ReplaceWhitespace(s string) string {
	s = strings.TrimRightFunc(s, func(r rune) bool { return r < 0x80 && isCSpace(byte(r)) })
	var b strings.Builder
	space := false
	started := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isCSpace(c) {
			if started {
				space = true
			}
			continue
		}
		if space {
			b.WriteByte('_')
			space = false
		}
		started = true
		b.WriteByte(c)
	}
	return b.String()
}

// udevAllowed is systemd's whitelisted_char_for_devnode set beyond
// alphanumerics.
const udevAllowed = "#+-.:=@_"

// udevReplaceChars is systemd's udev_replace_chars(str, white): characters
// that are neither alphanumeric, in udevAllowed or white, a "\x" escape nor
// part of a valid multi-byte UTF-8 sequence become '_'.
func udevReplaceChars(s, white string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if isASCIIAlnum(c) || strings.IndexByte(udevAllowed, c) >= 0 || strings.IndexByte(white, c) >= 0 {
			continue
		}
		if c == '\\' && i+1 < len(b) && b[i+1] == 'x' {
			i++
			continue
		}
		if c >= 0x80 {
			if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError && n > 1 {
				i += n - 1
				continue
			}
		}
		if isCSpace(c) && strings.IndexByte(white, ' ') >= 0 {
			b[i] = ' '
			continue
		}
		b[i] = '_'
	}
	return string(b)
}

func isASCIIAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// udevAttrValue is what udev substitutes for $attr{...} in a rule: the
// sysfs value without trailing whitespace, with characters outside
// UDEV_ALLOWED_CHARS_INPUT replaced.
func udevAttrValue(s string) string {
	s = strings.TrimRightFunc(s, func(r rune) bool { return r < 0x80 && isCSpace(byte(r)) })
	return udevReplaceChars(s, "/ $%?,")
}

// Encode is systemd's encode_devnode_name as used for ID_MODEL_ENC:
// every byte that is not alphanumeric, in udevAllowed or part of a valid
// multi-byte UTF-8 sequence is written as \xNN.
func Encode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			if r, n := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError && n > 1 {
				b.WriteString(s[i : i+n])
				i += n - 1
				continue
			}
		}
		if c == '\\' || !(isASCIIAlnum(c) || strings.IndexByte(udevAllowed, c) >= 0) {
			fmt.Fprintf(&b, "\\x%02x", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Unhexmangle is util-linux's unhexmangle_string (lsblk decodes
// ID_MODEL_ENC with it): each \xNN becomes the byte it names.
func Unhexmangle(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]) {
			b.WriteByte(unhex(s[i+2])<<4 | unhex(s[i+3]))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
