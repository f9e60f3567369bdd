//go:build race

package e2e

// raceEnabled: this test binary runs with the race detector, so the agent
// binary it drives is built with it too and its log is checked for races.
const raceEnabled = true
