// Package version holds the agent's version, reported by `ironic-agent
// version`, GET /v1/status and the agent_version field of heartbeats.
//
// The build stamps the `git describe` of the source tree and its commit
// with the linker:
//
//	go build -ldflags "-X github.com/ironic-go/ironic-agent/internal/version.describe=$(git describe --tags --always --dirty) \
//	    -X github.com/ironic-go/ironic-agent/internal/version.commit=$(git rev-parse HEAD)"
//
// (internal/ramdisk.BuildAgent, `make agent`). An unstamped build falls
// back to the VCS information the go command records, when it does.
package version

import (
	"runtime/debug"

	"github.com/ironic-go/ironic-agent/internal/lazyregexp"
)

// Base is the release reported when the build is not stamped from a
// release tag.
const Base = "0.1.0"

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
// reports: MAJOR.MINOR.PATCH of the release tag the build was stamped from
// (vX.Y.Z, also for commits after it), else Base. It never carries git's
// -N-gHASH-dirty suffix: Ironic keeps agent_version as a plain version.
func Version() string { return release(describe) }

// Describe is the stamped `git describe --tags --always --dirty` ("" when
// the build was not stamped).
func Describe() string { return describe }

// Commit returns the commit the binary was built from: the stamped one,
// else the go command's VCS information, else "".
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

// releaseTag matches git describe output that starts at a release tag.
var releaseTag = lazyregexp.New(`^v?(\d+\.\d+\.\d+)(-\d+-g[0-9a-f]+)?(-dirty)?$`)

func release(describe string) string {
	if m := releaseTag.FindStringSubmatch(describe); m != nil {
		return m[1]
	}
	return Base
}
