package script

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// math.random and math.randomseed: Redis's, on redisLrand48 (a 48-bit
// linear congruential generator, as lrand48), seeded per run.

func (vm *luaVM) lrand48() int32 {
	vm.run.rng = (0x5DEECE66D*vm.run.rng + 0xB) & (1<<48 - 1)
	return int32(vm.run.rng >> 17)
}

func (vm *luaVM) mathRandom(L *lua.LState) int {
	const max = math.MaxInt32
	r := float64(vm.lrand48()%max) / max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := checkInt(L, 1, "random")
		if u < 1 {
			argError(L, 1, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l := checkInt(L, 1, "random")
		u := checkInt(L, 2, "random")
		if l > u {
			argError(L, 2, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*(float64(u)-float64(l)+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (vm *luaVM) mathRandomSeed(L *lua.LState) int {
	seed := int32(checkInt(L, 1, "randomseed"))
	vm.run.rng = uint64(uint16(seed>>16))<<32 | uint64(uint16(seed))<<16 | 0x330E
	return 0
}

// mathLib is Lua 5.1's math library (but random) on Go's math package.
var mathLib = func() map[string]lua.LGFunction {
	f1 := func(name string, f func(float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(f(checkNumber(L, 1, name))))
			return 1
		}
	}
	f2 := func(name string, f func(a, b float64) float64) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(f(checkNumber(L, 1, name), checkNumber(L, 2, name))))
			return 1
		}
	}
	fold := func(name string, better func(a, b float64) bool) lua.LGFunction {
		return func(L *lua.LState) int {
			m := checkNumber(L, 1, name)
			for i := 2; i <= L.GetTop(); i++ {
				if d := checkNumber(L, i, name); better(d, m) {
					m = d
				}
			}
			L.Push(lua.LNumber(m))
			return 1
		}
	}
	return map[string]lua.LGFunction{
		"abs": f1("abs", math.Abs), "acos": f1("acos", math.Acos), "asin": f1("asin", math.Asin),
		"atan": f1("atan", math.Atan), "atan2": f2("atan2", math.Atan2), "ceil": f1("ceil", math.Ceil),
		"cos": f1("cos", math.Cos), "cosh": f1("cosh", math.Cosh),
		"deg": f1("deg", func(x float64) float64 { return x * (180 / math.Pi) }),
		"exp": f1("exp", math.Exp), "floor": f1("floor", math.Floor), "fmod": f2("fmod", math.Mod),
		"log": f1("log", math.Log), "log10": f1("log10", math.Log10), "mod": f2("mod", math.Mod),
		"pow": f2("pow", math.Pow), "rad": f1("rad", func(x float64) float64 { return x * (math.Pi / 180) }),
		"sin": f1("sin", math.Sin), "sinh": f1("sinh", math.Sinh), "sqrt": f1("sqrt", math.Sqrt),
		"tan": f1("tan", math.Tan), "tanh": f1("tanh", math.Tanh),
		"max": fold("max", func(a, b float64) bool { return a > b }),
		"min": fold("min", func(a, b float64) bool { return a < b }),
		"frexp": func(L *lua.LState) int {
			m, e := math.Frexp(checkNumber(L, 1, "frexp"))
			L.Push(lua.LNumber(m))
			L.Push(lua.LNumber(e))
			return 2
		},
		"ldexp": func(L *lua.LState) int {
			L.Push(lua.LNumber(math.Ldexp(checkNumber(L, 1, "ldexp"), checkInt(L, 2, "ldexp"))))
			return 1
		},
		"modf": func(L *lua.LState) int {
			ip, fp := math.Modf(checkNumber(L, 1, "modf"))
			L.Push(lua.LNumber(ip))
			L.Push(lua.LNumber(fp))
			return 2
		},
	}
}()
