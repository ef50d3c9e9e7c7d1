package hll

// Dense registers. regs starts at the first register byte and, like the
// sds string in Redis, has one byte (the terminator) past the last one:
// the last register reads and writes it (without effect).

func denseGet(regs []byte, i int) uint8 {
	b := i * registerBits / 8
	fb := uint(i * registerBits & 7)
	b0, b1 := uint(regs[b]), uint(regs[b+1])
	return uint8((b0>>fb | b1<<(8-fb)) & registerMax)
}

func denseSetReg(regs []byte, i int, val uint8) {
	b := i * registerBits / 8
	fb := uint(i * registerBits & 7)
	fb8 := 8 - fb
	v := uint(val)
	regs[b] &^= byte(registerMax << fb)
	regs[b] |= byte(v << fb)
	regs[b+1] &^= byte(registerMax >> fb8)
	regs[b+1] |= byte(v >> fb8)
}

// denseSet raises register i to count: 1 if it changed, else 0.
func denseSet(regs []byte, i int, count uint8) int {
	if count > denseGet(regs, i) {
		denseSetReg(regs, i, count)
		return 1
	}
	return 0
}
