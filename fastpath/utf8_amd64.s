//go:build !purego

#include "textflag.h"

// UTF-8 validation by table lookups on 32-byte blocks (Keiser and Lemire, "Validating UTF-8 In
// Less Than One Instruction Per Byte", 2021). Every error of UTF-8 shows in a pair of
// neighbouring bytes (prev1, cur), except a missing or surplus third or fourth byte, which needs
// the bytes two and three back. Each pair class gets one bit; a class is the conjunction of a
// set of high nibbles of prev1, a set of low nibbles of prev1 and a set of high nibbles of cur,
// so three 16-entry tables looked up with VPSHUFB and ANDed leave exactly the classes a pair
// falls in:
//
//	0x01 short:    a lead byte (Cx-Fx) not followed by a continuation byte (8x-Bx)
//	0x02 long:     ASCII followed by a continuation byte
//	0x04 E0 8x-9x: a three-byte form that fits in two bytes
//	0x08 too big:  F4 9x-Bx or F5-FF 9x-Bx, above U+10FFFF
//	0x10 ED Ax-Bx: a surrogate
//	0x20 C0-C1 8x-Bx: a two-byte form that fits in one byte
//	0x40 F0 8x or F5-FF 8x: a four-byte form that fits in three bytes, or above U+10FFFF
//	0x80 two continuation bytes in a row
//
// Two continuation bytes in a row are an error unless the byte two back is E0-FF or the byte
// three back is F0-FF; for those, bit 0x80 must be set. XOR of the two leaves zero exactly
// where the text is valid.

// nibble1Hi is indexed by the high nibble of the byte before.
DATA nibble1Hi<>+0x00(SB)/8, $0x0202020202020202
DATA nibble1Hi<>+0x08(SB)/8, $0x4915012180808080
DATA nibble1Hi<>+0x10(SB)/8, $0x0202020202020202
DATA nibble1Hi<>+0x18(SB)/8, $0x4915012180808080
GLOBL nibble1Hi<>(SB), RODATA|NOPTR, $32

// nibble1Lo is indexed by the low nibble of the byte before; the classes that do not depend
// on it (0x01, 0x02, 0x80) are set in every entry.
DATA nibble1Lo<>+0x00(SB)/8, $0xcbcbcb8b8383a3e7
DATA nibble1Lo<>+0x08(SB)/8, $0xcbcbdbcbcbcbcbcb
DATA nibble1Lo<>+0x10(SB)/8, $0xcbcbcb8b8383a3e7
DATA nibble1Lo<>+0x18(SB)/8, $0xcbcbdbcbcbcbcbcb
GLOBL nibble1Lo<>(SB), RODATA|NOPTR, $32

// nibble2Hi is indexed by the high nibble of the byte itself.
DATA nibble2Hi<>+0x00(SB)/8, $0x0101010101010101
DATA nibble2Hi<>+0x08(SB)/8, $0x01010101babaaee6
DATA nibble2Hi<>+0x10(SB)/8, $0x0101010101010101
DATA nibble2Hi<>+0x18(SB)/8, $0x01010101babaaee6
GLOBL nibble2Hi<>(SB), RODATA|NOPTR, $32

// lowNibble masks each byte to its low four bits.
DATA lowNibble<>+0x00(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibble<>+0x08(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibble<>+0x10(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibble<>+0x18(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lowNibble<>(SB), RODATA|NOPTR, $32

// third and fourth, subtracted with unsigned saturation, leave the high bit set only in bytes
// E0-FF and F0-FF: the leads that need a continuation two and three bytes later.
DATA third<>+0x00(SB)/8, $0x6060606060606060
DATA third<>+0x08(SB)/8, $0x6060606060606060
DATA third<>+0x10(SB)/8, $0x6060606060606060
DATA third<>+0x18(SB)/8, $0x6060606060606060
GLOBL third<>(SB), RODATA|NOPTR, $32

DATA fourth<>+0x00(SB)/8, $0x7070707070707070
DATA fourth<>+0x08(SB)/8, $0x7070707070707070
DATA fourth<>+0x10(SB)/8, $0x7070707070707070
DATA fourth<>+0x18(SB)/8, $0x7070707070707070
GLOBL fourth<>(SB), RODATA|NOPTR, $32

DATA highBit<>+0x00(SB)/8, $0x8080808080808080
DATA highBit<>+0x08(SB)/8, $0x8080808080808080
DATA highBit<>+0x10(SB)/8, $0x8080808080808080
DATA highBit<>+0x18(SB)/8, $0x8080808080808080
GLOBL highBit<>(SB), RODATA|NOPTR, $32

// openEnd, subtracted with unsigned saturation, leaves a non-zero byte where a block ends in
// the middle of a character: F0-FF in its third-last byte, E0-FF in its second-last, C0-FF in
// its last.
DATA openEnd<>+0x00(SB)/8, $0xffffffffffffffff
DATA openEnd<>+0x08(SB)/8, $0xffffffffffffffff
DATA openEnd<>+0x10(SB)/8, $0xffffffffffffffff
DATA openEnd<>+0x18(SB)/8, $0xbfdfefffffffffff
GLOBL openEnd<>(SB), RODATA|NOPTR, $32

// func validBlocksAVX2(b []byte, tail *[32]byte) bool
//
// Checks the whole 32-byte blocks of b, then tail: the rest of b padded with zero bytes, which
// are ASCII and so close any character left open before them as an error.
TEXT ·validBlocksAVX2(SB), NOSPLIT, $0-33
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	ANDQ $~31, CX
	MOVQ tail+24(FP), DX
	VPXOR Y0, Y0, Y0 // the block before
	VPXOR Y1, Y1, Y1 // errors so far
	VPXOR Y2, Y2, Y2 // a character left open at the end of the block before
	VMOVDQU nibble1Hi<>(SB), Y10
	VMOVDQU nibble1Lo<>(SB), Y11
	VMOVDQU nibble2Hi<>(SB), Y12
	VMOVDQU lowNibble<>(SB), Y13
	VMOVDQU openEnd<>(SB), Y14

next:
	TESTQ CX, CX
	JZ    last
	VMOVDQU (SI), Y3
	ADDQ  $32, SI
	SUBQ  $32, CX
	JMP   check

last:
	TESTQ DX, DX
	JZ    done
	VMOVDQU (DX), Y3
	XORQ  DX, DX

check:
	VPMOVMSKB Y3, AX
	TESTL     AX, AX
	JNZ       text
	// An ASCII block: valid unless the block before left a character open.
	VPOR  Y2, Y1, Y1
	VPXOR Y2, Y2, Y2
	VMOVDQU Y3, Y0
	JMP   next

text:
	// Y5, Y6, Y7: each byte's predecessor one, two and three back, across the two 128-bit
	// lanes and from the block before.
	VPERM2I128 $0x21, Y3, Y0, Y4
	VPALIGNR   $15, Y4, Y3, Y5
	VPALIGNR   $14, Y4, Y3, Y6
	VPALIGNR   $13, Y4, Y3, Y7

	VPSRLW  $4, Y5, Y8
	VPAND   Y13, Y8, Y8
	VPSHUFB Y8, Y10, Y8
	VPAND   Y13, Y5, Y9
	VPSHUFB Y9, Y11, Y9
	VPAND   Y9, Y8, Y8
	VPSRLW  $4, Y3, Y9
	VPAND   Y13, Y9, Y9
	VPSHUFB Y9, Y12, Y9
	VPAND   Y9, Y8, Y8

	VPSUBUSB third<>(SB), Y6, Y6
	VPSUBUSB fourth<>(SB), Y7, Y7
	VPOR     Y7, Y6, Y6
	VPAND    highBit<>(SB), Y6, Y6
	VPXOR    Y6, Y8, Y8
	VPOR     Y8, Y1, Y1

	VPSUBUSB Y14, Y3, Y2
	VMOVDQU  Y3, Y0
	JMP      next

done:
	VPTEST Y1, Y1
	SETEQ  ret+32(FP)
	VZEROUPPER
	RET

// func highBitsAVX2(dst *uint64, src *byte, words int)
//
// Sets bit k of dst[i] to the high bit of src[64*i+k], for i < words.
TEXT ·highBitsAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ words+16(FP), CX
	TESTQ CX, CX
	JZ   hdone

hloop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VPMOVMSKB Y0, AX
	VPMOVMSKB Y1, BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVQ      AX, (DI)
	ADDQ      $64, SI
	ADDQ      $8, DI
	DECQ      CX
	JNZ       hloop
	VZEROUPPER

hdone:
	RET

// func highBitsSSE2(dst *uint64, src *byte, words int)
//
// highBitsAVX2 on 16-byte registers, which every amd64 processor has.
TEXT ·highBitsSSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ words+16(FP), CX
	TESTQ CX, CX
	JZ   sdone

sloop:
	MOVOU    (SI), X0
	MOVOU    16(SI), X1
	MOVOU    32(SI), X2
	MOVOU    48(SI), X3
	PMOVMSKB X0, AX
	PMOVMSKB X1, BX
	PMOVMSKB X2, DX
	PMOVMSKB X3, R8
	SHLQ     $16, BX
	SHLQ     $32, DX
	SHLQ     $48, R8
	ORQ      BX, AX
	ORQ      R8, DX
	ORQ      DX, AX
	MOVQ     AX, (DI)
	ADDQ     $64, SI
	ADDQ     $8, DI
	DECQ     CX
	JNZ      sloop

sdone:
	RET

// func highBitsAVX512(dst *uint64, src *byte, words int)
//
// highBitsAVX2 on 64-byte registers: one byte-to-mask move per word of bits.
TEXT ·highBitsAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ words+16(FP), CX
	TESTQ CX, CX
	JZ   zdone

zloop:
	VMOVDQU64 (SI), Z0
	VPMOVB2M  Z0, K1
	KMOVQ     K1, (DI)
	ADDQ      $64, SI
	ADDQ      $8, DI
	DECQ      CX
	JNZ       zloop
	VZEROUPPER

zdone:
	RET
