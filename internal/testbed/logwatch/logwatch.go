// Package logwatch reads a ramdisk's log bundle (log.collect_system_logs'
// tar.gz) as Metal3's log watcher does: ironic-image's
// scripts/runlogwatch.sh lists the archive with `tar -tzf`, then prints
// each entry with `tar -xOzf FILE -- ENTRY` under a "**** Entry: NAME ****"
// header, each line prefixed with the file's name. Read runs those very
// commands (bash, GNU tar and sed of the host) and parses what they print,
// so a bundle that reads here reads in Metal3's ironic log container.
package logwatch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// processLogFile is runlogwatch.sh's process_log_file, as it is.
const processLogFile = `
set -euo pipefail
process_log_file() {
    local FILEPATH="$1"
    local FILENAME=$(basename "${FILEPATH}")

    echo "************ Contents of ${LOG_DIR}/${FILENAME} ramdisk log file bundle **************"
    tar -tzf "${FILEPATH}" | while read -r entry; do
        echo "${FILENAME}: **** Entry: ${entry} ****"
        tar -xOzf "${FILEPATH}" -- "${entry}" | sed -e "s/^/${FILENAME}: /"
        echo
    done
    rm -f "${FILEPATH}"
}
process_log_file "$1"
`

// Entry is one entry as the watcher printed it.
type Entry struct {
	Name string
	Text string // its lines, the prefix removed, each ending in "\n"
}

// Read writes tgz to dir as name (Ironic's "<node>_<instance>_<event>_<time>.tar.gz"),
// runs the watcher's function on it and returns the entries in the order
// printed, and the whole output.
func Read(ctx context.Context, dir, name string, tgz []byte) ([]Entry, string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, tgz, 0o644); err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", processLogFile, "runlogwatch", path)
	cmd.Env = append(os.Environ(), "LOG_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(out), fmt.Errorf("the log watcher's process_log_file on %s: %w: %s", name, err, tail(out))
	}
	entries, err := parse(string(out), name)
	return entries, string(out), err
}

// parse splits the watcher's output into entries.
func parse(out, name string) ([]Entry, error) {
	var entries []Entry
	header := name + ": **** Entry: "
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur *Entry
	var text strings.Builder
	flush := func() {
		if cur != nil {
			cur.Text = text.String()
			entries = append(entries, *cur)
		}
		text.Reset()
	}
	for sc.Scan() {
		l := sc.Text()
		if n, ok := strings.CutPrefix(l, header); ok {
			flush()
			cur = &Entry{Name: strings.TrimSuffix(n, " ****")}
			continue
		}
		if line, ok := strings.CutPrefix(l, name+": "); ok && cur != nil {
			text.WriteString(line + "\n")
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("the log watcher printed no entry of %s: %s", name, tail([]byte(out)))
	}
	return entries, nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Bundle are the entries of the agent's log bundle, each with text
// (docs/operator-guide.md lists them), besides udev/<device>.
var Bundle = []string{"init.log", "agent.log", "dmesg", "cmdline", "partitions", "mdstat", "multipath", "efibootmgr",
	"mount", "df", "ip_addr", "ip_route", "ps", "hardware-info.json", "lsblk"}

// Problems checks entries against Bundle: each entry present with some
// text (those of mayFail may instead be <name>.error with the reason),
// and at least one udev/<device> entry, each a JSON object. It returns
// what is wrong, and notes on the entries of mayFail that failed.
func Problems(entries []Entry, mayFail ...string) (problems, notes []string) {
	files := map[string]string{}
	var names []string
	for _, e := range entries {
		files[e.Name] = e.Text
		names = append(names, e.Name)
	}
	for _, n := range Bundle {
		if strings.TrimSpace(files[n]) != "" {
			continue
		}
		if slices.Contains(mayFail, n) && strings.TrimSpace(files[n+".error"]) != "" {
			notes = append(notes, n+".error: "+strings.TrimSpace(files[n+".error"]))
			continue
		}
		problems = append(problems, fmt.Sprintf("entry %s missing or empty (%s.error: %q; entries: %v)", n, n, files[n+".error"], names))
	}
	udev := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name, "udev/") {
			udev++
			if !strings.HasPrefix(e.Text, "{") {
				problems = append(problems, fmt.Sprintf("%s is no JSON object: %q", e.Name, e.Text))
			}
		}
	}
	if udev == 0 {
		problems = append(problems, fmt.Sprintf("no udev/<device> entry (entries: %v)", names))
	}
	return problems, notes
}
