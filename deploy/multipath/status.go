package multipath

import (
	"fmt"
	"strconv"
	"strings"
)

// PathState is one path of a map as the kernel's multipath target
// reports it in its status (dmsetup status): the path's device number,
// whether it is active ("A") or failed ("F"), and how often it failed.
type PathState struct {
	Dev       string // "8:16"
	Active    bool
	FailCount uint64
}

// maxStatusCount bounds every count a status line gives (the kernel's
// own limit for groups and paths is 1024), so a wrong line cannot make
// the parser allocate or loop for long.
const maxStatusCount = 1 << 16

// ParseStatus reads the paths of a multipath target's status line, as
// drivers/md/dm-mpath.c writes it (STATUSTYPE_INFO):
//
//	<#features> <features...> <#handler args> <handler args...>
//	<#groups> <group to use next>
//	then per group: <A|E|D> <#selector args> <selector args...>
//	                <#paths> <#selector args per path>
//	                then per path: <major:minor> <A|F> <fail count> <selector args...>
//
// Every count is read, never assumed, so a kernel that reports more
// features or selector fields than today's is still understood.
func ParseStatus(s string) ([]PathState, error) {
	w := strings.Fields(s)
	pos := 0
	next := func(what string) (string, error) {
		if pos >= len(w) {
			return "", fmt.Errorf("multipath status %q: ends before the %s", s, what)
		}
		pos++
		return w[pos-1], nil
	}
	count := func(what string) (int, error) {
		t, err := next(what)
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > maxStatusCount {
			return 0, fmt.Errorf("multipath status %q: %s %q is not a count", s, what, t)
		}
		return n, nil
	}
	skip := func(what string) error {
		n, err := count("number of " + what)
		if err != nil {
			return err
		}
		if pos+n > len(w) {
			return fmt.Errorf("multipath status %q: %d %s announced, %d words left", s, n, what, len(w)-pos)
		}
		pos += n
		return nil
	}
	if err := skip("features"); err != nil {
		return nil, err
	}
	if err := skip("hardware handler arguments"); err != nil {
		return nil, err
	}
	groups, err := count("number of priority groups")
	if err != nil {
		return nil, err
	}
	if _, err := count("next priority group"); err != nil {
		return nil, err
	}
	var paths []PathState
	for g := range groups {
		state, err := next(fmt.Sprintf("state of priority group %d", g+1))
		if err != nil {
			return nil, err
		}
		if state != "A" && state != "E" && state != "D" {
			return nil, fmt.Errorf("multipath status %q: priority group %d state %q, want A, E or D", s, g+1, state)
		}
		if err := skip("selector arguments"); err != nil {
			return nil, err
		}
		n, err := count("number of paths")
		if err != nil {
			return nil, err
		}
		perPath, err := count("number of selector arguments per path")
		if err != nil {
			return nil, err
		}
		for range n {
			dev, err := next("path's device")
			if err != nil {
				return nil, err
			}
			if !validDev(dev) {
				return nil, fmt.Errorf("multipath status %q: path %q is not major:minor", s, dev)
			}
			st, err := next("state of path " + dev)
			if err != nil {
				return nil, err
			}
			if st != "A" && st != "F" {
				return nil, fmt.Errorf("multipath status %q: path %s state %q, want A or F", s, dev, st)
			}
			fc, err := next("fail count of path " + dev)
			if err != nil {
				return nil, err
			}
			fails, err := strconv.ParseUint(fc, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("multipath status %q: path %s fail count %q", s, dev, fc)
			}
			if pos+perPath > len(w) {
				return nil, fmt.Errorf("multipath status %q: path %s: %d selector arguments announced, %d words left", s, dev, perPath, len(w)-pos)
			}
			pos += perPath
			paths = append(paths, PathState{Dev: dev, Active: st == "A", FailCount: fails})
		}
	}
	if pos != len(w) {
		return nil, fmt.Errorf("multipath status %q: %d words left after the last group", s, len(w)-pos)
	}
	return paths, nil
}

// validDev says whether s is "major:minor" in decimal.
func validDev(s string) bool {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(maj, 10, 32)
	_, err2 := strconv.ParseUint(min, 10, 32)
	return err1 == nil && err2 == nil
}
