package blockdev

import (
	"fmt"
	"strings"
)

// ESP is an EFI system partition found on a disk, with what a UEFI boot
// entry's hard drive node says about it.
type ESP struct {
	Number int
	Path   string
	// Start and Size in sectors of the table (512 on MBR).
	Start, Size uint64
	GPT         bool
	// GUID is the GPT unique partition GUID as stored on disk; on MBR the
	// entry names the disk by MBRSignature instead.
	GUID         [16]byte
	MBRSignature uint32
}

// FindESP finds the EFI system partition of dev as IPA's efi_utils does:
// on GPT the partition of the ESP type, failing that the one whose unique
// GUID is partUUID; on MBR the partition of type 0xEF. It returns nil, nil
// when there is none. A disk image in a file has no sector size to ask,
// so GPT is also looked for at 512 and 4096 bytes.
func FindESP(dev, partUUID string) (*ESP, error) {
	var t PartTable
	for _, ss := range []int{sectorSizeOf(dev), 512, 4096} {
		var err error
		if t, err = ReadPartTable(dev, ss); err != nil {
			return nil, fmt.Errorf("reading the partition table of %s: %w", dev, err)
		}
		if t.Kind == "gpt" || !t.HasProtective {
			break
		}
	}
	var found *PartEntry
	for i := range t.Partitions {
		p := &t.Partitions[i]
		switch {
		case t.Kind == "gpt" && p.TypeGUID == ESPTypeGUID:
			found = p
		case t.Kind == "gpt" && found == nil && partUUID != "" && strings.EqualFold(p.GUID, partUUID):
			found = p
			continue // an ESP-type partition later on wins
		case t.Kind == "dos" && p.MBRType == 0xef:
			found = p
		default:
			continue
		}
		break
	}
	if found == nil {
		return nil, nil
	}
	if found.Size == 0 {
		return nil, fmt.Errorf("%s: partition %d of the %s table has no extent (it ends before it starts)", dev, found.Number, t.Kind)
	}
	sector := int64(t.SectorSize)
	if t.Kind == "dos" {
		sector = 512
	}
	return &ESP{Number: found.Number, Path: PartitionPath(dev, found.Number),
		Start: uint64(found.Start / sector), Size: uint64(found.Size / sector),
		GPT: t.Kind == "gpt", GUID: found.rawGUID, MBRSignature: t.MBRSignature}, nil
}
