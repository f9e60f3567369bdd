package qemu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unicode/utf16"
)

// OVMF keeps Secure Boot's on/off setting, apart from the keys, in its
// own variable SecureBootEnable (EDK II's gEfiSecureBootEnableDisableGuid):
// with a platform key enrolled, the firmware verifies images and reports
// SecureBoot=1 only while it is 1. Its setup menu changes it; a BMC's
// Redfish SecureBootEnable is the same switch. OVMF_VARS_4M.ms.fd carries
// it set. SetSecureBootEnable changes it in a machine's variable store
// while the machine is off, as the menu would have, keeping the keys and
// every other variable (the boot entries an OS wrote).

// The variable store inside the firmware volume of an OVMF_VARS file
// (EDK II MdeModulePkg/Include/Guid/VariableFormat.h): after the volume's
// header (HeaderLength at byte 48, signature _FVH at 40) a 28-byte store
// header, then variables, each a 60-byte authenticated header (StartId
// 0x55AA, State, attributes, count, time, key index, NameSize at 36,
// DataSize at 40, vendor GUID at 44), the UTF-16 name and the data, the
// next one 4-byte aligned.
const (
	fvSignatureOffset   = 40
	fvHeaderLenOffset   = 48
	varStoreHeaderLen   = 28
	varHeaderLen        = 60
	varStartID          = 0x55aa
	varStateAdded       = 0x3f // VAR_ADDED: the live copy
	secureBootEnableVar = "SecureBootEnable"
)

// secureBootEnableGUID is gEfiSecureBootEnableDisableGuid,
// f0a30bc7-af08-4556-99c4-001009c93a44, in its byte order in the store.
var secureBootEnableGUID = [16]byte{0xc7, 0x0b, 0xa3, 0xf0, 0x08, 0xaf, 0x56, 0x45, 0x99, 0xc4, 0x00, 0x10, 0x09, 0xc9, 0x3a, 0x44}

// secureBootEnableData finds the data byte of the live SecureBootEnable
// variable in vars, an OVMF variable store file's bytes.
func secureBootEnableData(vars []byte) (int, error) {
	if len(vars) < fvHeaderLenOffset+2 || string(vars[fvSignatureOffset:fvSignatureOffset+4]) != "_FVH" {
		return 0, errors.New("not an OVMF variable store (no firmware volume header)")
	}
	name := utf16.Encode([]rune(secureBootEnableVar + "\x00"))
	nameBytes := make([]byte, 2*len(name))
	for i, c := range name {
		binary.LittleEndian.PutUint16(nameBytes[2*i:], c)
	}
	off := int(binary.LittleEndian.Uint16(vars[fvHeaderLenOffset:])) + varStoreHeaderLen
	for off+varHeaderLen <= len(vars) && binary.LittleEndian.Uint16(vars[off:]) == varStartID {
		nameSize := int(binary.LittleEndian.Uint32(vars[off+36:]))
		dataSize := int(binary.LittleEndian.Uint32(vars[off+40:]))
		end := off + varHeaderLen + nameSize + dataSize
		if nameSize < 0 || dataSize < 0 || end > len(vars) || end < off {
			return 0, fmt.Errorf("variable at %#x runs past the store", off)
		}
		if vars[off+2] == varStateAdded && dataSize == 1 && bytes.Equal(vars[off+44:off+60], secureBootEnableGUID[:]) &&
			bytes.Equal(vars[off+varHeaderLen:off+varHeaderLen+nameSize], nameBytes) {
			return off + varHeaderLen + nameSize, nil
		}
		off = (end + 3) &^ 3
	}
	return 0, fmt.Errorf("no %s variable (the store has no Secure Boot keys: start from %s)", secureBootEnableVar, OVMFSecureBootVars)
}

// SetSecureBootEnable turns Secure Boot on or off in the OVMF variable
// store at path (a machine's VarsPath, the machine off), keeping its keys
// and every other variable.
func SetSecureBootEnable(path string, on bool) error {
	vars, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	at, err := secureBootEnableData(vars)
	if err != nil {
		return fmt.Errorf("qemu: %s: %w", path, err)
	}
	want := byte(0)
	if on {
		want = 1
	}
	if vars[at] == want {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	if _, err := f.WriteAt([]byte{want}, int64(at)); err != nil {
		f.Close()
		return fmt.Errorf("qemu: %s: %w", path, err)
	}
	return f.Close()
}
