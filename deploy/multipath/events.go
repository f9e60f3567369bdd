// Log events of this package that tests wait for on the console: the e2e
// VM tests match these messages (with internal/testbed/logtext.Msg), so
// they refer to the constants, and a reworded message breaks the build,
// not a VM test. Change a message's text only together with its tests.

package multipath

const (
	// EventMapMade is logged when a multipath map was made.
	EventMapMade = "multipath map made"
	// EventPathAdded is logged when a path came back to its multipath map.
	EventPathAdded = "multipath path added to its map"
)
