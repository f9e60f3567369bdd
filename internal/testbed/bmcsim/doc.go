// Package bmcsim holds the BMC simulators of the VM test bed: OpenIPMI's
// ipmi_sim as a machine's IPMI BMC (IPMISim) and a Redfish service with
// virtual media (RedfishBMC). Each holds its machine's power: a power-on
// starts QEMU (internal/testbed/qemu), a power-off kills it. A binary that
// starts an IPMISim must call qemu.MaybeRelay first thing, since ipmi_sim
// runs that binary again as the BMC's control program.
package bmcsim
