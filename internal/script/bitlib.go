package script

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// bit: LuaBitOp, as in Redis.

func bitArg(L *lua.LState, n int, fname string) uint32 {
	f := checkNumber(L, n, fname)
	return uint32(math.Float64bits(f + 6755399441055744.0))
}

func bitRet(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

var bitLib = map[string]lua.LGFunction{
	"tobit":   func(L *lua.LState) int { return bitRet(L, bitArg(L, 1, "tobit")) },
	"bnot":    func(L *lua.LState) int { return bitRet(L, ^bitArg(L, 1, "bnot")) },
	"band":    bitFold("band", func(a, b uint32) uint32 { return a & b }),
	"bor":     bitFold("bor", func(a, b uint32) uint32 { return a | b }),
	"bxor":    bitFold("bxor", func(a, b uint32) uint32 { return a ^ b }),
	"lshift":  bitShift("lshift", func(b, n uint32) uint32 { return b << n }),
	"rshift":  bitShift("rshift", func(b, n uint32) uint32 { return b >> n }),
	"arshift": bitShift("arshift", func(b, n uint32) uint32 { return uint32(int32(b) >> n) }),
	"rol":     bitShift("rol", func(b, n uint32) uint32 { return b<<n | b>>((32-n)&31) }),
	"ror":     bitShift("ror", func(b, n uint32) uint32 { return b>>n | b<<((32-n)&31) }),
	"bswap": func(L *lua.LState) int {
		b := bitArg(L, 1, "bswap")
		return bitRet(L, b>>24|(b>>8)&0xff00|(b&0xff00)<<8|b<<24)
	},
	"tohex": func(L *lua.LState) int {
		b := bitArg(L, 1, "tohex")
		n := int32(8)
		if L.GetTop() >= 2 {
			n = int32(bitArg(L, 2, "tohex"))
		}
		digits := "0123456789abcdef"
		if n < 0 {
			n, digits = -n, "0123456789ABCDEF"
		}
		if n > 8 {
			n = 8
		}
		buf := make([]byte, n)
		for i := n - 1; i >= 0; i-- {
			buf[i] = digits[b&15]
			b >>= 4
		}
		L.Push(lua.LString(buf))
		return 1
	},
}

func bitFold(name string, op func(a, b uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int {
		b := bitArg(L, 1, name)
		for i := L.GetTop(); i > 1; i-- {
			b = op(b, bitArg(L, i, name))
		}
		return bitRet(L, b)
	}
}

func bitShift(name string, op func(b, n uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int {
		b := bitArg(L, 1, name)
		n := bitArg(L, 2, name) & 31
		return bitRet(L, op(b, n))
	}
}
