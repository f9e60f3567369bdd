// Package rdinit is PID 1 of the agent ramdisk: it mounts the kernel file
// systems, loads the kernel modules listed in the initramfs, has the
// network set up (package netup: DHCPv4, IPv6 router advertisements with
// SLAAC and DHCPv6, VLANs, or a config drive's network_data.json with
// static addresses, bonds and VLANs), then starts and supervises the agent
// (`ironic-agent run`, or another subcommand named on the kernel command
// line) and powers the machine off or restarts the agent when it exits.
// It leaves the clock alone: the agent sets it from ipa-ntp-server before
// anything that needs it (see agent/clocksync.go), and a restart of an agent
// that failed to (fail_if_clock_not_set) is the retry.
//
// # Capturing a server over PXE
//
// Three parameters let an operator run one command on a machine instead of
// the agent and get its output back, with nothing but a network boot:
//
//   - ironic_agent.cmd=CMD[,ARG...] runs `ironic-agent CMD ARG...` in
//     place of `ironic-agent run` (for example capture-fixture,/run/fx,
//     which records what the inventory collectors read);
//   - ironic_agent.upload=URL and ironic_agent.upload_dir=DIR, set together,
//     POST DIR as a gzip'ed tar to URL once the command has exited with
//     status 0 (a plain HTTP server that accepts a POST will do);
//   - ironic_agent.exit=restart|poweroff|reboot|hold says what happens
//     next: by default the agent is restarted and any other command powers
//     the machine off, while hold keeps it up for a look at the console.
//
// Booting the ramdisk with, say, `ironic_agent.cmd=capture-fixture,/run/fx
// ironic_agent.upload=http://10.0.0.1:8000/ ironic_agent.upload_dir=/run/fx`
// captures a server's hardware description without Ironic. The
// project's VM tests take their captures back the same way.
package rdinit
