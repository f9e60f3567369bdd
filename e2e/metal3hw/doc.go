// Package metal3hw is Metal3 baremetal-operator's conversion of what Ironic
// stored from an inspection (GET /v1/nodes/{node}/inventory, decoded with
// gophercloud v2) into a BareMetalHost's HardwareDetails, copied from
// baremetal-operator at a pinned commit, so tests can check that what this
// agent sends comes out right in Metal3. Only tests import it.
package metal3hw
