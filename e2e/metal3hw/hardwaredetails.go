// Copyright The Metal3 Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Copied from github.com/metal3-io/baremetal-operator at commit
// 02aa5059e3482f9dc3b5115c3a45cec4b000ae16,
// pkg/provisioner/ironic/hardwaredetails/hardwaredetails.go, unchanged
// but for two things: the types come from this package instead of
// metal3api (the "metal3api." qualifier is dropped), and go-logr's Logger
// is the one-method Logger below, so the module needs no go-logr for a
// test.

package metal3hw

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Logger is the part of go-logr's logr.Logger the conversion calls.
type Logger interface {
	Error(err error, msg string, keysAndValues ...any)
}

// GetHardwareDetails converts Ironic introspection data into BareMetalHost HardwareDetails.
func GetHardwareDetails(data *nodes.InventoryData, logger Logger) *HardwareDetails {
	ironicData, err := data.PluginData.AsStandardData()
	if err != nil {
		logger.Error(err, "cannot get plugin data from inventory, some fields will not be available")
	}

	details := new(HardwareDetails)
	details.Firmware = getFirmwareDetails(data.Inventory.SystemVendor.Firmware)
	details.SystemVendor = getSystemVendorDetails(data.Inventory.SystemVendor)
	details.RAMMebibytes = data.Inventory.Memory.PhysicalMb
	details.NIC = getNICDetails(data.Inventory.Interfaces, ironicData)
	details.Storage = getStorageDetails(data.Inventory.Disks)
	details.CPU = getCPUDetails(&data.Inventory.CPU)
	details.Hostname = data.Inventory.Hostname
	return details
}

func getVLANs(lldp map[string]any) (vlans []VLAN, vlanid VLANID) {
	if lldp == nil {
		return
	}
	if spvs, ok := lldp["switch_port_vlans"]; ok {
		if data, ok := spvs.([]map[string]any); ok {
			vlans = make([]VLAN, len(data))
			for i, vlan := range data {
				vid, _ := vlan["id"].(int)
				name, _ := vlan["name"].(string)
				vlans[i] = VLAN{
					ID:   VLANID(vid), //#nosec G115:gosec
					Name: name,
				}
			}
		}
	}
	if vid, ok := lldp["switch_port_untagged_vlan_id"].(int); ok {
		vlanid = VLANID(vid) //#nosec G115:gosec
	}
	return
}

func getLLDPData(lldp map[string]any) *LLDP {
	if lldp == nil {
		return nil
	}

	lldpData := &LLDP{}
	hasData := false

	if val, ok := lldp["switch_chassis_id"].(string); ok && val != "" {
		lldpData.SwitchID = val
		hasData = true
	}
	if val, ok := lldp["switch_port_id"].(string); ok && val != "" {
		lldpData.PortID = val
		hasData = true
	}
	if val, ok := lldp["switch_system_name"].(string); ok && val != "" {
		lldpData.SwitchSystemName = val
		hasData = true
	}

	if !hasData {
		return nil
	}

	return lldpData
}

func getNICDetails(ifdata []inventory.InterfaceType, ironicData inventory.StandardPluginData) []NIC {
	var nics []NIC
	for _, intf := range ifdata {
		pxeEnabled := ironicData.AllInterfaces[intf.Name].PXEEnabled
		lldp := ironicData.ParsedLLDP[intf.Name]

		vlans, vlanid := getVLANs(lldp)
		lldpData := getLLDPData(lldp)
		// We still store one nic even if both ips are unset
		// if both are set, we store two nics with each ip
		if intf.IPV4Address != "" || intf.IPV6Address == "" {
			nics = append(nics, NIC{
				Name: intf.Name,
				Model: strings.TrimLeft(fmt.Sprintf("%s %s",
					intf.Vendor, intf.Product), " "),
				MAC:        intf.MACAddress,
				IP:         intf.IPV4Address,
				VLANs:      vlans,
				VLANID:     vlanid,
				SpeedGbps:  intf.SpeedMbps / 1000, //nolint:mnd
				PXE:        pxeEnabled,
				LLDP:       lldpData,
				PCIAddress: intf.PCIAddress,
			})
		}
		if intf.IPV6Address != "" {
			nics = append(nics, NIC{
				Name: intf.Name,
				Model: strings.TrimLeft(fmt.Sprintf("%s %s",
					intf.Vendor, intf.Product), " "),
				MAC:        intf.MACAddress,
				IP:         intf.IPV6Address,
				VLANs:      vlans,
				VLANID:     vlanid,
				SpeedGbps:  intf.SpeedMbps / 1000, //nolint:mnd
				PXE:        pxeEnabled,
				LLDP:       lldpData,
				PCIAddress: intf.PCIAddress,
			})
		}
	}
	return nics
}

func getDiskType(diskdata inventory.RootDiskType) DiskType {
	if diskdata.Rotational {
		return HDD
	}

	if strings.HasPrefix(diskdata.Name, "/dev/nvme") {
		return NVME
	}

	return SSD
}

func getStorageDetails(diskdata []inventory.RootDiskType) []Storage {
	storage := make([]Storage, len(diskdata))
	for i, disk := range diskdata {
		deviceName := disk.Name
		var allNames []string
		if deviceName != "" {
			allNames = append(allNames, deviceName)
		}
		if disk.ByPath != "" {
			deviceName = disk.ByPath
			allNames = append(allNames, deviceName)
		}
		storage[i] = Storage{
			Name:               deviceName,
			AlternateNames:     allNames,
			Rotational:         disk.Rotational,
			Type:               getDiskType(disk),
			SizeBytes:          Capacity(disk.Size),
			Vendor:             disk.Vendor,
			Model:              disk.Model,
			SerialNumber:       disk.Serial,
			WWN:                disk.Wwn,
			WWNVendorExtension: disk.WwnVendorExtension,
			WWNWithExtension:   disk.WwnWithExtension,
			HCTL:               disk.Hctl,
		}
	}
	return storage
}

func getSystemVendorDetails(vendor inventory.SystemVendorType) HardwareSystemVendor {
	return HardwareSystemVendor{
		Manufacturer: vendor.Manufacturer,
		ProductName:  vendor.ProductName,
		SerialNumber: vendor.SerialNumber,
	}
}

func getCPUDetails(cpudata *inventory.CPUType) CPU {
	if cpudata == nil {
		return CPU{}
	}

	var freq float64
	fmt.Sscanf(cpudata.Frequency, "%f", &freq) //nolint:errcheck
	freq = math.Round(freq)                    // Ensure freq has no fractional part
	sort.Strings(cpudata.Flags)
	cpu := CPU{
		Arch:           cpudata.Architecture,
		Model:          cpudata.ModelName,
		ClockMegahertz: ClockSpeed(freq) * MegaHertz,
		Count:          cpudata.Count,
		Flags:          cpudata.Flags,
	}

	return cpu
}

func getFirmwareDetails(firmwaredata inventory.SystemFirmwareType) Firmware {
	return Firmware{
		BIOS: BIOS{
			Vendor:  firmwaredata.Vendor,
			Version: firmwaredata.Version,
			Date:    firmwaredata.BuildDate,
		},
	}
}
