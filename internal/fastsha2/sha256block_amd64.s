//go:build amd64 && !purego

// SHA-256's block function (FIPS 180-4, 6.2.2) in integer instructions
// only, for x86-64 CPUs without AVX2. All 64 rounds are unrolled and the
// eight working variables live in R8-R15 for the whole block: each round
// names them in rotated order instead of moving them, and the message
// schedule W[0..63] lives in the 256-byte frame. AX carries W[t] into its
// round; BX, CX and DX are scratch. Under QEMU's TCG this runs about
// twice as fast as crypto/sha256's generic Go code, whose rounds spill
// and move the variables (see the package comment).

#include "textflag.h"

// LOAD: W[t] = the t-th big-endian word of the block, in AX.
#define LOAD(t) \
	MOVL ((t)*4)(SI), AX; \
	BSWAPL AX; \
	MOVL AX, ((t)*4)(SP)

// SCHEDULE: W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], in AX.
#define SCHEDULE(t) \
	MOVL (((t)-2)*4)(SP), AX; \
	MOVL AX, BX; \
	RORL $17, AX; \
	MOVL BX, CX; \
	RORL $19, CX; \
	XORL CX, AX; \
	SHRL $10, BX; \
	XORL BX, AX; \
	MOVL (((t)-15)*4)(SP), BX; \
	MOVL BX, CX; \
	RORL $7, BX; \
	MOVL CX, DX; \
	RORL $18, DX; \
	XORL DX, BX; \
	SHRL $3, CX; \
	XORL CX, BX; \
	ADDL BX, AX; \
	ADDL (((t)-7)*4)(SP), AX; \
	ADDL (((t)-16)*4)(SP), AX; \
	MOVL AX, ((t)*4)(SP)

// ROUND: T1 = h + Σ1(e) + Ch(e,f,g) + K[t] + W[t]; d += T1;
// h = T1 + Σ0(a) + Maj(a,b,c). The caller's next round passes the
// registers shifted by one, which is the spec's h=g, g=f, ..., a=T1+T2.
#define ROUND(a, b, c, d, e, f, g, h, k) \
	ADDL k, h; \
	ADDL AX, h; \
	MOVL e, BX; \
	RORL $6, BX; \
	MOVL e, CX; \
	RORL $11, CX; \
	XORL CX, BX; \
	RORL $14, CX; \
	XORL CX, BX; \
	ADDL BX, h; \
	MOVL f, BX; \
	XORL g, BX; \
	ANDL e, BX; \
	XORL g, BX; \
	ADDL BX, h; \
	ADDL h, d; \
	MOVL a, BX; \
	RORL $2, BX; \
	MOVL a, CX; \
	RORL $13, CX; \
	XORL CX, BX; \
	RORL $9, CX; \
	XORL CX, BX; \
	ADDL BX, h; \
	MOVL a, BX; \
	ORL b, BX; \
	ANDL c, BX; \
	MOVL a, CX; \
	ANDL b, CX; \
	ORL CX, BX; \
	ADDL BX, h

// func block256AMD64(dig *[8]uint32, p []byte)
TEXT ·block256AMD64(SB), NOSPLIT, $256-32
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), DI
	ANDQ $-64, DI
	JEQ  done
	ADDQ SI, DI
	MOVQ dig+0(FP), AX
	MOVL 0(AX), R8
	MOVL 4(AX), R9
	MOVL 8(AX), R10
	MOVL 12(AX), R11
	MOVL 16(AX), R12
	MOVL 20(AX), R13
	MOVL 24(AX), R14
	MOVL 28(AX), R15

loop:
	LOAD(0)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0x428a2f98)
	LOAD(1)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0x71374491)
	LOAD(2)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0xb5c0fbcf)
	LOAD(3)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0xe9b5dba5)
	LOAD(4)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x3956c25b)
	LOAD(5)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0x59f111f1)
	LOAD(6)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x923f82a4)
	LOAD(7)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0xab1c5ed5)
	LOAD(8)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0xd807aa98)
	LOAD(9)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0x12835b01)
	LOAD(10)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0x243185be)
	LOAD(11)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0x550c7dc3)
	LOAD(12)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x72be5d74)
	LOAD(13)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0x80deb1fe)
	LOAD(14)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x9bdc06a7)
	LOAD(15)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0xc19bf174)
	SCHEDULE(16)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0xe49b69c1)
	SCHEDULE(17)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0xefbe4786)
	SCHEDULE(18)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0x0fc19dc6)
	SCHEDULE(19)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0x240ca1cc)
	SCHEDULE(20)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x2de92c6f)
	SCHEDULE(21)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0x4a7484aa)
	SCHEDULE(22)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x5cb0a9dc)
	SCHEDULE(23)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0x76f988da)
	SCHEDULE(24)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0x983e5152)
	SCHEDULE(25)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0xa831c66d)
	SCHEDULE(26)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0xb00327c8)
	SCHEDULE(27)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0xbf597fc7)
	SCHEDULE(28)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0xc6e00bf3)
	SCHEDULE(29)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0xd5a79147)
	SCHEDULE(30)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x06ca6351)
	SCHEDULE(31)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0x14292967)
	SCHEDULE(32)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0x27b70a85)
	SCHEDULE(33)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0x2e1b2138)
	SCHEDULE(34)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0x4d2c6dfc)
	SCHEDULE(35)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0x53380d13)
	SCHEDULE(36)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x650a7354)
	SCHEDULE(37)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0x766a0abb)
	SCHEDULE(38)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x81c2c92e)
	SCHEDULE(39)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0x92722c85)
	SCHEDULE(40)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0xa2bfe8a1)
	SCHEDULE(41)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0xa81a664b)
	SCHEDULE(42)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0xc24b8b70)
	SCHEDULE(43)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0xc76c51a3)
	SCHEDULE(44)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0xd192e819)
	SCHEDULE(45)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0xd6990624)
	SCHEDULE(46)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0xf40e3585)
	SCHEDULE(47)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0x106aa070)
	SCHEDULE(48)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0x19a4c116)
	SCHEDULE(49)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0x1e376c08)
	SCHEDULE(50)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0x2748774c)
	SCHEDULE(51)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0x34b0bcb5)
	SCHEDULE(52)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x391c0cb3)
	SCHEDULE(53)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0x4ed8aa4a)
	SCHEDULE(54)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0x5b9cca4f)
	SCHEDULE(55)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0x682e6ff3)
	SCHEDULE(56)
	ROUND(R8, R9, R10, R11, R12, R13, R14, R15, $0x748f82ee)
	SCHEDULE(57)
	ROUND(R15, R8, R9, R10, R11, R12, R13, R14, $0x78a5636f)
	SCHEDULE(58)
	ROUND(R14, R15, R8, R9, R10, R11, R12, R13, $0x84c87814)
	SCHEDULE(59)
	ROUND(R13, R14, R15, R8, R9, R10, R11, R12, $0x8cc70208)
	SCHEDULE(60)
	ROUND(R12, R13, R14, R15, R8, R9, R10, R11, $0x90befffa)
	SCHEDULE(61)
	ROUND(R11, R12, R13, R14, R15, R8, R9, R10, $0xa4506ceb)
	SCHEDULE(62)
	ROUND(R10, R11, R12, R13, R14, R15, R8, R9, $0xbef9a3f7)
	SCHEDULE(63)
	ROUND(R9, R10, R11, R12, R13, R14, R15, R8, $0xc67178f2)

	// H += the working variables; on to the next block.
	MOVQ dig+0(FP), AX
	ADDL 0(AX), R8
	MOVL R8, 0(AX)
	ADDL 4(AX), R9
	MOVL R9, 4(AX)
	ADDL 8(AX), R10
	MOVL R10, 8(AX)
	ADDL 12(AX), R11
	MOVL R11, 12(AX)
	ADDL 16(AX), R12
	MOVL R12, 16(AX)
	ADDL 20(AX), R13
	MOVL R13, 20(AX)
	ADDL 24(AX), R14
	MOVL R14, 24(AX)
	ADDL 28(AX), R15
	MOVL R15, 28(AX)
	ADDQ $64, SI
	CMPQ SI, DI
	JB   loop

done:
	RET
