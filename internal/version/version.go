// Package version holds the agent's version, reported by `ironic-agent
// version`, GET /v1/status and the agent_version field of heartbeats.
package version

import "runtime/debug"

// Version is the release of this agent. Ironic only logs agent_version, but it
// must be stable for one build.
const Version = "0.1.0"

// Commit returns the VCS revision the binary was built from, or "" when the
// build carries no VCS information.
func Commit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}
