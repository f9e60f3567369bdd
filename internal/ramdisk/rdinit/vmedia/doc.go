// Package vmedia takes what Ironic puts on virtual media for a ramdisk
// booted from it, as Ironic Python Agent does (ironic_python_agent/utils.py,
// copy_config_from_vmedia and get_agent_params):
//
//   - the configuration on the boot ISO (label VMEDIA_BOOT_ISO, or config-2
//     when Ironic made it the config drive): etc/ironic-python-agent/ and
//     etc/ironic-python-agent.d/ copied into /etc before the agent starts,
//     which is how Ironic hands over the CA of its TLS API
//     ([agent]api_ca_file: ironic.crt and ironic-tls.conf);
//   - the parameters Ironic writes into parameters.txt on a vfat image
//     labelled ir-vfd-dev, inserted as a virtual USB stick or floppy when
//     the node's driver_info has config_via_removable, merged into the
//     kernel command line's, its values winning.
//
// Both only when the kernel command line has boot_method=vmedia (Ironic's
// virtual-media boot interfaces put it there), and only from a device that
// looks like virtual media as IPA judges it: a CD-ROM, or a USB disk under
// 4 GiB, never a partition.
package vmedia
