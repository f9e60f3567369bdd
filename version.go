// Package ironicagent holds what the repository root owns for the Go
// code: the release version, from the VERSION file, its one source of
// truth (the release build, the agent's agent_version and the release
// notes all read it). The agent reads it through internal/version.
package ironicagent

import _ "embed"

// VERSION is the file's content: MAJOR.MINOR.PATCH and a newline.
//
//go:embed VERSION
var VERSION string
