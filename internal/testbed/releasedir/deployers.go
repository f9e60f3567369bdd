package releasedir

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// The functions below read a checksum file exactly as one deployer does,
// so a test can hold a release's .sha256 files and SHA256SUMS to what the
// deployers accept; each names the code it follows.

// BifrostDigests is what Bifrost's download_ipa_image.yml extracts from a
// checksum file for the download URL whose base name is basename:
//
//	awk '/<basename>|^[a-z0-9]+$/{print $1}' <checksum file>
//
// the first field of every line that contains basename, read as an
// extended regular expression (its dots match any character), or that is
// one word of lower-case letters and digits. Bifrost joins the output
// into get_url's "sha256:<output>", so anything but exactly one line
// fails the download.
func BifrostDigests(file []byte, basename string) ([]string, error) {
	// awk's dynamic regexps are POSIX EREs; a file name's characters
	// (letters, digits, '.', '-', '_') mean the same in Go's syntax.
	if strings.ContainsAny(basename, `\^$*+?()[]{}|`) {
		return nil, fmt.Errorf("bifrost checksum: base name %q holds regular-expression syntax this reading does not model", basename)
	}
	re, err := regexp.Compile(basename + `|^[a-z0-9]+$`)
	if err != nil {
		return nil, fmt.Errorf("bifrost checksum: %w", err)
	}
	var out []string
	for _, l := range awkRecords(file) {
		if !re.MatchString(l) {
			continue
		}
		// $1: the first field, split on blanks; an empty line has none.
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		} else {
			out = append(out, "")
		}
	}
	return out, nil
}

// awkRecords splits file into awk's records: lines, the last one without
// its newline too.
func awkRecords(file []byte) []string {
	s := string(file)
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// AnsibleGetURLDigest is the digest Ansible's get_url module takes from
// the checksum file at a "checksum: sha256:<checksum URL>" for a
// download of rawURL (lib/ansible/modules/get_url.py): a file of one line
// holding one word is that digest; otherwise each line split at its first
// space gives a digest and a name (one leading ' ' or '*' removed, then
// every leading '.' and '/' stripped: Python's lstrip("./")), and the
// first line whose name equals the URL path's base name wins. The digest
// then loses every non-word character and is lower-cased, and must be
// hexadecimal.
func AnsibleGetURLDigest(file []byte, rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("get_url: %w", err)
	}
	filename := path.Base(u.Path)
	if u.Path == "" || strings.HasSuffix(u.Path, "/") {
		filename = "index.html"
	}
	// Python's "for line in f" with rstrip('\n'): lines keep a '\r'.
	lines := strings.SplitAfter(string(file), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], "\n")
	}
	type entry struct{ sum, name string }
	var entries []entry
	if len(lines) == 1 && len(strings.Fields(lines[0])) == 1 {
		entries = append(entries, entry{lines[0], filename})
	} else {
		for _, l := range lines {
			sum, name, ok := strings.Cut(l, " ")
			if !ok {
				continue
			}
			if strings.HasPrefix(name, " ") || strings.HasPrefix(name, "*") {
				name = name[1:]
			}
			entries = append(entries, entry{sum, strings.TrimLeft(name, "./")})
		}
	}
	sum, found := "", false
	for _, e := range entries {
		if e.name == filename {
			sum, found = e.sum, true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("get_url: unable to find a checksum for file %q", filename)
	}
	sum = strings.ToLower(nonWord.ReplaceAllString(sum, ""))
	if sum == "" || strings.Trim(sum, "0123456789abcdef") != "" {
		return "", fmt.Errorf("get_url: the checksum format is invalid: %q", sum)
	}
	return sum, nil
}

// nonWord is Python's \W+ (ASCII letters, digits and '_' are word
// characters; a checksum's other characters go).
var nonWord = regexp.MustCompile(`[^0-9A-Za-z_]+`)

// Metal3Stem is the name Metal3's ironic-ipa-downloader (get-resource.sh,
// get_filename_without_extension) gives the files it expects inside the
// tarball filename: the name without its first extension of EXTENSIONS
// (".tar.gz .tar.gz.sha256") that it ends with, else without its last two
// dot-separated extensions. It links <stem>.kernel and <stem>.initramfs
// from the unpacked tarball; it reads no checksum file.
func Metal3Stem(filename string) string {
	// ${filename%.*.*}: the shortest suffix ".x.y" removed, if any.
	stem := filename
	if i := strings.LastIndex(stem, "."); i >= 0 {
		if j := strings.LastIndex(stem[:i], "."); j >= 0 {
			stem = stem[:j]
		}
	}
	for _, ext := range []string{".tar.gz", ".tar.gz.sha256"} {
		// bname=$(basename "$filename" "$ex"); [ "${filename:${#bname}}" = "$ex" ]
		bname := path.Base(filename)
		if strings.HasSuffix(bname, ext) && bname != ext {
			bname = strings.TrimSuffix(bname, ext)
		}
		if len(bname) <= len(filename) && filename[len(bname):] == ext {
			return bname
		}
	}
	return stem
}
