// Package nvmevm holds the VM test of deploy/nvme and deploy/erase's
// native NVMe path (TestNativeNVMeInQEMU): a package of its own so the
// unit tests of those packages do not boot a machine.
package nvmevm
