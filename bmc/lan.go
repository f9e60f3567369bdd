package bmc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/logging"
)

// LAN configuration parameters (IPMI 2.0 table 23-4).
const (
	paramIPAddress       = 3
	paramMACAddress      = 5
	paramIPv6Enables     = 51 // 0 IPv4 only, 1 IPv6 only, 2 both
	paramIPv6StaticAddr  = 56
	paramIPv6DynamicAddr = 59

	// Channel medium types (table 6-3) ipmitool accepts as LAN.
	medium8023LAN  = 0x04
	mediumOtherLAN = 0x06

	// firstChannel and lastChannel are the channels IPA asks: of 0-15,
	// only 1-11 can carry a LAN.
	firstChannel = 1
	lastChannel  = 11

	// maxAddressSets bounds the walk over IPv6 address set selectors;
	// ipmitool walks until the BMC refuses one, which a broken BMC might
	// never do.
	maxAddressSets = 16
)

// Addresses is the BMC part of the inventory, with IPA's conventions:
// nil pointers are JSON null (or, for MAC, an absent key).
type Addresses struct {
	IPv4 *string // bmc_address: "0.0.0.0" when the BMC has none
	IPv6 *string // bmc_v6address: "::/0" when the BMC has none
	MAC  *string // bmc_mac: nil when no channel has a usable one
}

// NoDevice is the result without an IPMI device: everything null, as IPA
// reports when /dev/ipmi* is missing.
func NoDevice() Addresses { return Addresses{} }

// Detect asks the BMC, over t, for its LAN addresses on channels 1 to 11,
// following IPA's rules (hardware.py get_bmc_address, get_bmc_v6address,
// get_bmc_mac), which read ipmitool's "lan print" and "lan6 print":
//
//   - bmc_address is the first IPv4 address that is not 0.0.0.0, else
//     "0.0.0.0".
//   - bmc_v6address is, on the first channel whose IPv6/IPv4 addressing
//     enables say ipv6 or both and that has one, the first active DHCPv6 or
//     SLAAC address, else the first active enabled static one (never ::
//     itself), without its prefix length; else "::/0".
//   - bmc_mac is the first MAC that is not all zeros on a channel that has
//     an IPv4 address other than 0.0.0.0, or some IPv6 address that is
//     neither :: nor link-local; else absent.
//
// Like ipmitool, a channel is asked only if Get Channel Info calls it a
// LAN. Detect is meant to be called once an IPMI device is known to
// exist: as in IPA, a BMC that answers nothing still yields "0.0.0.0" and
// "::/0". Every failed request is logged at debug level.
func Detect(ctx context.Context, t Transport, logger *slog.Logger) (Addresses, error) {
	logger = logging.OrDiscard(logger)
	var ipv4, ipv6, mac string
	silent := 0
	// Who the BMC is, for the log (ipmitool's "mc info"); it also tells a
	// BMC that answers from one that does not before the channel walk.
	q0 := query{ctx: ctx, t: t, log: logger, silent: &silent}
	if data, ok := q0.call(Request{NetFn: NetFnApp, Cmd: CmdGetDeviceID}); ok {
		if id, err := DecodeDeviceID(data); err == nil {
			logger.Info(EventBMCFound, "device_id", id.DeviceID, "manufacturer", id.ManufacturerID,
				"product", id.ProductID, "firmware", id.Firmware, "ipmi_version", id.IPMIVersion)
		}
	}
	for ch := uint8(firstChannel); ch <= lastChannel; ch++ {
		if err := ctx.Err(); err != nil {
			return Addresses{}, err
		}
		q := query{ctx: ctx, t: t, ch: ch, log: logger, silent: &silent}
		if !q.isLAN() {
			continue
		}
		// ipmitool's "lan print" order: IPv4 address, then MAC; "lan6
		// print" after.
		ip4, haveIP4 := q.ipv4()
		if haveIP4 && ipv4 == "" && ip4 != "0.0.0.0" {
			ipv4 = ip4
		}
		m, haveMAC := q.mac()
		dynamic, static := q.ipv6Addresses()
		if ipv6 == "" && q.ipv6Enabled() {
			ipv6 = pickIPv6(dynamic, static)
		}
		if mac == "" && haveIP4 && haveMAC && m != "00:00:00:00:00:00" &&
			(ip4 != "0.0.0.0" || hasRoutableIPv6(dynamic, static)) {
			mac = m
		}
	}
	if err := ctx.Err(); err != nil {
		return Addresses{}, err
	}
	out := Addresses{IPv4: ptr("0.0.0.0"), IPv6: ptr("::/0")}
	if ipv4 != "" {
		out.IPv4 = &ipv4
	}
	if ipv6 != "" {
		out.IPv6 = &ipv6
	}
	if mac != "" {
		out.MAC = &mac
	}
	return out, nil
}

func ptr(s string) *string { return &s }

// query asks one channel.
type query struct {
	ctx context.Context
	t   Transport
	ch  uint8
	log *slog.Logger
	// silent counts the requests in a row that got no response at all
	// (not even an error completion code); shared by all channels.
	silent *int
}

// maxSilent requests without any response end the questioning: a BMC
// that is hung or absent behind its device would otherwise cost every
// remaining request its full timeout (more than a minute over 11 channels).
const maxSilent = 3

func (q query) call(req Request) ([]byte, bool) {
	if *q.silent >= maxSilent {
		return nil, false
	}
	data, err := call(q.ctx, q.t, req)
	var cc *CompletionError
	switch {
	case err == nil, errors.As(err, &cc):
		*q.silent = 0
	default:
		*q.silent++
		if *q.silent == maxSilent {
			q.log.Warn("the BMC does not answer; not asking it any more", "requests", maxSilent, "error", err)
		}
	}
	if err != nil {
		q.log.Debug("IPMI request failed", "channel", q.ch, "error", err)
		return nil, false
	}
	return data, true
}

// isLAN asks Get Channel Info for the channel's medium.
func (q query) isLAN() bool {
	data, ok := q.call(Request{NetFn: NetFnApp, Cmd: CmdGetChannelInfo, Data: []byte{q.ch}})
	if !ok {
		return false
	}
	medium, err := DecodeChannelMedium(data)
	if err != nil {
		q.log.Debug("bad Get Channel Info response", "channel", q.ch, "error", err)
		return false
	}
	return medium == medium8023LAN || medium == mediumOtherLAN
}

// param returns a LAN configuration parameter's data (after the revision
// byte).
func (q query) param(param, set uint8) ([]byte, bool) {
	data, ok := q.call(Request{NetFn: NetFnTransport, Cmd: CmdGetLANConfParam, Data: []byte{q.ch, param, set, 0}})
	if !ok {
		return nil, false
	}
	if len(data) < 1 {
		q.log.Debug("LAN parameter response without its revision byte", "channel", q.ch, "param", param)
		return nil, false
	}
	return data[1:], true
}

func (q query) ipv4() (string, bool) {
	data, ok := q.param(paramIPAddress, 0)
	if !ok {
		return "", false
	}
	a, err := DecodeIPv4(data)
	if err != nil {
		q.log.Debug("bad IP address parameter", "channel", q.ch, "error", err)
		return "", false
	}
	return a, true
}

func (q query) mac() (string, bool) {
	data, ok := q.param(paramMACAddress, 0)
	if !ok {
		return "", false
	}
	m, err := DecodeMAC(data)
	if err != nil {
		q.log.Debug("bad MAC address parameter", "channel", q.ch, "error", err)
		return "", false
	}
	return m, true
}

func (q query) ipv6Enabled() bool {
	data, ok := q.param(paramIPv6Enables, 0)
	return ok && len(data) >= 1 && (data[0] == 1 || data[0] == 2)
}

// ipv6Addresses walks the dynamic and static address sets from set 0
// until the BMC refuses one, as ipmitool's lan6 print does.
func (q query) ipv6Addresses() (dynamic, static []IPv6Address) {
	walk := func(param uint8) []IPv6Address {
		var out []IPv6Address
		for set := range uint8(maxAddressSets) {
			data, ok := q.param(param, set)
			if !ok {
				break
			}
			a, err := DecodeIPv6Address(data)
			if err != nil {
				q.log.Debug("bad IPv6 address parameter", "channel", q.ch, "param", param, "set", set, "error", err)
				break
			}
			out = append(out, a)
		}
		return out
	}
	return walk(paramIPv6DynamicAddr), walk(paramIPv6StaticAddr)
}

// IPv6Address is one IPv6 static or dynamic address set (parameters 56
// and 59): set selector, enable bit and source, address, prefix length,
// status.
type IPv6Address struct {
	Enabled   bool  // static: bit 7 of the source byte
	Source    uint8 // 0 static, 1 SLAAC, 2 DHCPv6
	Addr      netip.Addr
	PrefixLen uint8
	Status    uint8 // 0 active, 1 disabled, 2 pending, 3 failed, 4 deprecated, 5 invalid
}

// String is ipmitool's "Address:" form, address/prefix.
func (a IPv6Address) String() string { return fmt.Sprintf("%s/%d", a.Addr, a.PrefixLen) }

// pickIPv6 applies IPA's get_bmc_v6address choice: dynamic (DHCPv6 or
// SLAAC) before static (enabled), active only, not :: itself.
func pickIPv6(dynamic, static []IPv6Address) string {
	for _, a := range dynamic {
		if (a.Source == 1 || a.Source == 2) && a.Status == 0 && !a.Addr.IsUnspecified() {
			return a.Addr.String()
		}
	}
	for _, a := range static {
		if a.Enabled && a.Status == 0 && !a.Addr.IsUnspecified() {
			return a.Addr.String()
		}
	}
	return ""
}

// hasRoutableIPv6 is IPA's get_bmc_mac test on ipmitool's lan6 output: any
// listed address, whatever its state, that does not start with "::" or
// "fe80".
func hasRoutableIPv6(dynamic, static []IPv6Address) bool {
	for _, a := range append(append([]IPv6Address(nil), dynamic...), static...) {
		s := a.Addr.String()
		if !strings.HasPrefix(s, "::") && !strings.HasPrefix(s, "fe80") {
			return true
		}
	}
	return false
}

// DeviceID is the Get Device ID response (IPMI 2.0 section 20.1).
type DeviceID struct {
	DeviceID       uint8
	DeviceRevision uint8
	Firmware       string // major.minor, as ipmitool prints it
	IPMIVersion    string // e.g. "2.0"
	ManufacturerID uint32 // IANA enterprise number
	ProductID      uint16
}

// DecodeDeviceID decodes a Get Device ID response (after the completion
// code).
func DecodeDeviceID(data []byte) (DeviceID, error) {
	if len(data) < 11 {
		return DeviceID{}, fmt.Errorf("get device id: want at least 11 bytes, got %d", len(data))
	}
	return DeviceID{
		DeviceID:       data[0],
		DeviceRevision: data[1] & 0x0f,
		Firmware:       fmt.Sprintf("%d.%02x", data[2]&0x7f, data[3]),
		IPMIVersion:    fmt.Sprintf("%d.%d", data[4]&0x0f, data[4]>>4),
		ManufacturerID: uint32(data[6]) | uint32(data[7])<<8 | uint32(data[8]&0x0f)<<16,
		ProductID:      uint16(data[9]) | uint16(data[10])<<8,
	}, nil
}

// DecodeChannelMedium returns the channel medium type from a Get Channel
// Info response (after the completion code): channel, medium, protocol, ...
func DecodeChannelMedium(data []byte) (uint8, error) {
	if len(data) < 2 {
		return 0, fmt.Errorf("get channel info: want at least 2 bytes, got %d", len(data))
	}
	return data[1] & 0x7f, nil
}

// DecodeIPv4 decodes the IP address parameter (3) the way ipmitool
// prints it.
func DecodeIPv4(data []byte) (string, error) {
	if len(data) < 4 {
		return "", fmt.Errorf("IP address parameter: want 4 bytes, got %d", len(data))
	}
	return netip.AddrFrom4([4]byte(data[:4])).String(), nil
}

// DecodeMAC decodes the MAC address parameter (5), lowercase as ipmitool
// prints it.
func DecodeMAC(data []byte) (string, error) {
	if len(data) < 6 {
		return "", fmt.Errorf("MAC address parameter: want 6 bytes, got %d", len(data))
	}
	return net.HardwareAddr(data[:6]).String(), nil
}

// DecodeIPv6Address decodes an IPv6 static (56) or dynamic (59) address
// parameter: set selector, source/enable, 16 address bytes, prefix length,
// status.
func DecodeIPv6Address(data []byte) (IPv6Address, error) {
	if len(data) < 20 {
		return IPv6Address{}, fmt.Errorf("IPv6 address parameter: want 20 bytes, got %d", len(data))
	}
	return IPv6Address{
		Enabled:   data[1]&0x80 != 0,
		Source:    data[1] & 0x0f,
		Addr:      netip.AddrFrom16([16]byte(data[2:18])),
		PrefixLen: data[18],
		Status:    data[19] & 0x0f,
	}, nil
}
