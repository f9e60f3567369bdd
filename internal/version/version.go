// Package version holds the agent's version, reported by `ironic-agent
// version`, GET /v1/status, the agent_version field of heartbeats and the
// first line the agent and the init log.
//
// The release is the repository's VERSION file, compiled in (the root
// package embeds it), so every build reports it, stamped or not. The build
// also stamps the `git describe` of the source tree and its commit with
// the linker:
//
//	go build -ldflags "-X github.com/ironic-go/ironic-agent/internal/version.describe=$(git describe --tags --always --dirty) \
//	    -X github.com/ironic-go/ironic-agent/internal/version.commit=$(git rev-parse HEAD)"
//
// (internal/ramdisk.BuildAgent, `make agent`, `make release`). An
// unstamped build falls back to the VCS information the go command
// records, when it does.
package version

import (
	"runtime/debug"
	"strings"

	ironicagent "github.com/ironic-go/ironic-agent"
)

// Stamped at link time (-ldflags -X); they are never written at run time.
var (
	describe string
	commit   string
)

// DescribeVar and CommitVar are the linker names of the stamped values.
const (
	DescribeVar = "github.com/ironic-go/ironic-agent/internal/version.describe"
	CommitVar   = "github.com/ironic-go/ironic-agent/internal/version.commit"
)

// Version is the release Ironic sees (agent_version) and GET /v1/status
// reports: the VERSION file, MAJOR.MINOR.PATCH. It is the same for a
// build from the release tag and for one from any later or modified
// tree: Ironic keeps agent_version as a plain version, and Build says
// which tree it was.
func Version() string { return strings.TrimSpace(ironicagent.VERSION) }

// Describe is the stamped `git describe --tags --always --dirty` ("" when
// the build was not stamped).
func Describe() string { return describe }

// Build names the tree the binary was built from, for people: Version
// itself for a build of the clean release tag (v<Version>), else Version
// with SemVer build metadata: "+g<12 hex digits of the commit>", then
// ".dirty" for a tree with uncommitted changes, or "+unknown" when the
// commit is not known (a source tarball).
func Build() string { return BuildOf(Version(), describe, Commit()) }

// BuildOf is Build for version v of a tree with that describe and commit
// (the release build names the tree it builds so).
func BuildOf(v, describe, commit string) string {
	if describe == "v"+v {
		return v
	}
	rev, dirty := strings.CutSuffix(commit, "-dirty")
	if strings.HasSuffix(describe, "-dirty") {
		dirty = true
	}
	if rev == "" {
		return v + "+unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	meta := "+g" + rev
	if dirty {
		meta += ".dirty"
	}
	return v + meta
}

// Commit returns the commit the binary was built from: the stamped one,
// else the go command's VCS information ("-dirty" appended for a modified
// tree), else "".
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// LogAttrs are the slog attributes of the first line the agent and the
// init log: the version, the build, the commit and the running kernel's
// release (uname -r).
func LogAttrs() []any {
	c := Commit()
	if c == "" {
		c = "unknown"
	}
	return []any{"version", Version(), "build", Build(), "commit", c, "kernel", KernelRelease()}
}
