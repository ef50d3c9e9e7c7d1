package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// The syntax tree rewriter.

// Helpers the rewritten code calls; no Lua identifier can name them, and
// the chunk copies them into locals first (upvalues of nested functions).
const (
	hConcat      = "\x00cc"
	hIndexKey    = "\x00ik"
	hIndexKeyNew = "\x00ikn"
	hValues      = "\x00va"
	hLen         = "\x00ln"
)

// rewriter rewrites a chunk so that what gopher-lua does in one
// instruction at a cost proportional to the data goes through a helper
// that charges the budget:
//
//	a .. b .. c      -> \0cc(descs, a, b, c)
//	#x               -> \0ln(desc, x)
//	t[k] = v         -> do local o = t; local key = \0ik(o, k); o[key] = v end
//	{[k] = v}        -> {[\0ikn(k, n)] = v}
//	{..., f()}       -> {..., \0va(f())}       (also for ...)
//	f(a, ...)        -> f(a, \0va(...))        (also return ...)
//
// String keys and small integer constants are left alone. descs name the
// operands for Lua 5.1's error messages ("local 'x'"). It also bounds the
// nesting of the syntax tree, which gopher-lua's compiler walks
// recursively.
type rewriter struct {
	funcs []*rwFunc
	depth int
	tmp   int
}

type rwFunc struct{ blocks []map[string]bool }

type rwError string

func (e rwError) Error() string { return string(e) }

func (rw *rewriter) chunk(stmts []ast.Stmt) (out []ast.Stmt, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(rwError)
			if !ok {
				panic(p)
			}
			out, err = nil, e
		}
	}()
	rw.funcs = []*rwFunc{{blocks: []map[string]bool{{}}}}
	names := []string{hConcat, hIndexKey, hIndexKeyNew, hValues, hLen}
	exprs := make([]ast.Expr, len(names))
	for i, n := range names {
		exprs[i] = &ast.IdentExpr{Value: n}
	}
	rw.declare(names...)
	body := rw.stmts(stmts)
	return append([]ast.Stmt{&ast.LocalAssignStmt{Names: names, Exprs: exprs}}, body...), nil
}

func (rw *rewriter) fn() *rwFunc { return rw.funcs[len(rw.funcs)-1] }

func (rw *rewriter) declare(names ...string) {
	f := rw.fn()
	b := f.blocks[len(f.blocks)-1]
	for _, n := range names {
		b[n] = true
	}
}

func (rw *rewriter) push() { f := rw.fn(); f.blocks = append(f.blocks, map[string]bool{}) }
func (rw *rewriter) pop()  { f := rw.fn(); f.blocks = f.blocks[:len(f.blocks)-1] }

// kind says whether a name is a local, an upvalue or a global here.
func (rw *rewriter) kind(name string) string {
	for i := len(rw.funcs) - 1; i >= 0; i-- {
		bl := rw.funcs[i].blocks
		for j := len(bl) - 1; j >= 0; j-- {
			if bl[j][name] {
				if i == len(rw.funcs)-1 {
					return "local"
				}
				return "upvalue"
			}
		}
	}
	return "global"
}

// desc names an operand as Lua 5.1's error messages do.
func (rw *rewriter) desc(e ast.Expr) string {
	var d string
	switch e := e.(type) {
	case *ast.IdentExpr:
		d = rw.kind(e.Value) + " '" + e.Value + "'"
	case *ast.AttrGetExpr:
		if k, ok := e.Key.(*ast.StringExpr); ok {
			d = "field '" + k.Value + "'"
		}
	}
	if strings.ContainsAny(d, "\n\x00") {
		return ""
	}
	return d
}

func (rw *rewriter) block(stmts []ast.Stmt) []ast.Stmt {
	rw.push()
	defer rw.pop()
	return rw.stmts(stmts)
}

func (rw *rewriter) stmts(stmts []ast.Stmt) []ast.Stmt {
	out := stmts[:0:0]
	for _, s := range stmts {
		out = append(out, rw.stmt(s))
	}
	return out
}

func (rw *rewriter) enter() {
	rw.depth++
	if rw.depth > maxDepth {
		panic(rwError("chunk has too many syntax levels"))
	}
}

func (rw *rewriter) stmt(s ast.Stmt) ast.Stmt {
	rw.enter()
	defer func() { rw.depth-- }()
	switch s := s.(type) {
	case *ast.AssignStmt:
		return rw.assign(s)
	case *ast.LocalAssignStmt:
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				rw.declare(s.Names...) // as gopher-lua compiles it
			}
		}
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.declare(s.Names...)
	case *ast.FuncCallStmt:
		s.Expr = rw.expr(s.Expr)
	case *ast.DoBlockStmt:
		s.Stmts = rw.block(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = rw.expr(s.Condition)
		s.Stmts = rw.block(s.Stmts)
	case *ast.RepeatStmt:
		rw.push() // the condition sees the block's locals
		s.Stmts = rw.stmts(s.Stmts)
		s.Condition = rw.expr(s.Condition)
		rw.pop()
	case *ast.IfStmt:
		s.Condition = rw.expr(s.Condition)
		s.Then = rw.block(s.Then)
		s.Else = rw.block(s.Else)
	case *ast.NumberForStmt:
		s.Init = rw.expr(s.Init)
		s.Limit = rw.expr(s.Limit)
		if s.Step != nil {
			s.Step = rw.expr(s.Step)
		}
		rw.push()
		rw.declare(s.Name)
		s.Stmts = rw.stmts(s.Stmts)
		rw.pop()
	case *ast.GenericForStmt:
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.push()
		rw.declare(s.Names...)
		s.Stmts = rw.stmts(s.Stmts)
		rw.pop()
	case *ast.FuncDefStmt:
		if s.Name.Receiver != nil {
			s.Name.Receiver = rw.expr(s.Name.Receiver)
		}
		rw.function(s.Func, s.Name.Func == nil)
	case *ast.ReturnStmt:
		for i, e := range s.Exprs {
			s.Exprs[i] = rw.expr(e)
		}
		rw.chargeVarargs(s.Exprs)
	}
	return s
}

func (rw *rewriter) function(f *ast.FunctionExpr, method bool) {
	rw.funcs = append(rw.funcs, &rwFunc{blocks: []map[string]bool{{}}})
	if method {
		rw.declare("self")
	}
	rw.declare(f.ParList.Names...)
	f.Stmts = rw.stmts(f.Stmts)
	rw.funcs = rw.funcs[:len(rw.funcs)-1]
}

// needsKeyCheck reports whether storing at key k can append many nil
// slots to a table (or store at nil).
func needsKeyCheck(k ast.Expr) bool {
	switch k := k.(type) {
	case *ast.StringExpr, *ast.TrueExpr, *ast.FalseExpr:
		return false
	case *ast.NumberExpr:
		n, err := strconv.ParseFloat(k.Value, 64)
		return err != nil || n > freeGap+1
	}
	return true
}

func (rw *rewriter) tempName() string {
	rw.tmp++
	return "\x00t" + strconv.Itoa(rw.tmp)
}

func ident(name string, line int) *ast.IdentExpr {
	e := &ast.IdentExpr{Value: name}
	e.SetLine(line)
	e.SetLastLine(line)
	return e
}

func localStmt(name string, e ast.Expr, line int) *ast.LocalAssignStmt {
	s := &ast.LocalAssignStmt{Names: []string{name}, Exprs: []ast.Expr{e}}
	s.SetLine(line)
	s.SetLastLine(line)
	return s
}

// helperCall builds a call of helper h; single: adjusted to one value (and
// never a tail call, so error positions stay right).
func helperCall(h string, line int, single bool, args ...ast.Expr) *ast.FuncCallExpr {
	c := &ast.FuncCallExpr{Func: ident(h, line), Args: args, AdjustRet: single}
	c.SetLine(line)
	c.SetLastLine(line)
	return c
}

func (rw *rewriter) assign(s *ast.AssignStmt) ast.Stmt {
	checked := false
	for _, l := range s.Lhs {
		if a, ok := l.(*ast.AttrGetExpr); ok && needsKeyCheck(a.Key) {
			checked = true
		}
	}
	if !checked {
		for i, l := range s.Lhs {
			s.Lhs[i] = rw.expr(l)
		}
		for i, r := range s.Rhs {
			s.Rhs[i] = rw.expr(r)
		}
		return s
	}
	// Evaluate each target's table and key, in order, into fresh locals
	// (so that the table checked is the table written), then assign.
	line := s.Line()
	var pre []ast.Stmt
	for i, l := range s.Lhs {
		a, ok := l.(*ast.AttrGetExpr)
		if !ok {
			continue
		}
		o := rw.tempName()
		pre = append(pre, localStmt(o, rw.expr(a.Object), line))
		key := a.Key
		if needsKeyCheck(a.Key) {
			k := rw.tempName()
			pre = append(pre, localStmt(k, helperCall(hIndexKey, a.Line(), true, ident(o, line), rw.expr(a.Key)), a.Line()))
			key = ident(k, line)
		}
		t := &ast.AttrGetExpr{Object: ident(o, line), Key: key}
		t.SetLine(a.Line())
		t.SetLastLine(a.LastLine())
		s.Lhs[i] = t
	}
	for i, r := range s.Rhs {
		s.Rhs[i] = rw.expr(r)
	}
	d := &ast.DoBlockStmt{Stmts: append(pre, s)}
	d.SetLine(line)
	d.SetLastLine(s.LastLine())
	return d
}

// chargeVarargs wraps a trailing ... (all the varargs, copied by the VM)
// into a call that charges for them.
func (rw *rewriter) chargeVarargs(list []ast.Expr) {
	if n := len(list); n > 0 {
		if v, ok := list[n-1].(*ast.Comma3Expr); ok && !v.AdjustRet {
			list[n-1] = helperCall(hValues, v.Line(), false, v)
		}
	}
}

func isMultRet(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		return !e.AdjustRet
	case *ast.Comma3Expr:
		return !e.AdjustRet
	}
	return false
}

func (rw *rewriter) expr(e ast.Expr) ast.Expr {
	rw.enter()
	defer func() { rw.depth-- }()
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		var ops []ast.Expr
		for cur := e; ; {
			ops = append(ops, cur.Lhs)
			next, ok := cur.Rhs.(*ast.StringConcatOpExpr)
			if !ok {
				ops = append(ops, cur.Rhs)
				break
			}
			cur = next
		}
		descs := make([]string, len(ops))
		args := make([]ast.Expr, len(ops)+1)
		for i, op := range ops {
			descs[i] = rw.desc(op)
			args[i+1] = rw.expr(op)
		}
		ds := &ast.StringExpr{Value: strings.Join(descs, "\n")}
		ds.SetLine(e.Line())
		args[0] = ds
		return helperCall(hConcat, e.Line(), true, args...)
	case *ast.UnaryLenOpExpr:
		ds := &ast.StringExpr{Value: rw.desc(e.Expr)}
		ds.SetLine(e.Line())
		return helperCall(hLen, e.Line(), true, ds, rw.expr(e.Expr))
	case *ast.AttrGetExpr:
		e.Object = rw.expr(e.Object)
		e.Key = rw.expr(e.Key)
	case *ast.TableExpr:
		npos := 0
		for i, f := range e.Fields {
			if f.Key == nil {
				f.Value = rw.expr(f.Value)
				if i == len(e.Fields)-1 && isMultRet(f.Value) {
					f.Value = helperCall(hValues, f.Value.Line(), false, f.Value)
				} else {
					npos++
				}
				continue
			}
			check := needsKeyCheck(f.Key)
			f.Key = rw.expr(f.Key)
			if check {
				n := &ast.NumberExpr{Value: strconv.Itoa(npos - npos%lua.FieldsPerFlush)}
				n.SetLine(f.Key.Line())
				f.Key = helperCall(hIndexKeyNew, f.Key.Line(), true, f.Key, n)
			}
			f.Value = rw.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		if e.Func != nil {
			e.Func = rw.expr(e.Func)
		}
		if e.Receiver != nil {
			e.Receiver = rw.expr(e.Receiver)
		}
		for i, a := range e.Args {
			e.Args[i] = rw.expr(a)
		}
		rw.chargeVarargs(e.Args)
	case *ast.LogicalOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		e.Lhs = rw.expr(e.Lhs)
		e.Rhs = rw.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		e.Expr = rw.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		e.Expr = rw.expr(e.Expr)
	case *ast.FunctionExpr:
		rw.function(e, false)
	}
	return e
}

// Helpers of rewritten scripts (see rewriter).

// concatFn(descs, v1, ..., vn) is v1 .. ... .. vn: Lua 5.1's luaV_concat,
// with the result's size checked and charged. descs names the operands
// ("local 'x'", ...) for error messages, one per line.
func (vm *luaVM) concatFn(L *lua.LState) int {
	descs := strings.Split(string(L.Get(1).(lua.LString)), "\n")
	vals := make([]lua.LValue, L.GetTop()-1)
	for i := range vals {
		vals[i] = L.Get(i + 2)
	}
	for len(descs) < len(vals) {
		descs = append(descs, "")
	}
	top := len(vals)
	for top > 1 {
		a, b := vals[top-2], vals[top-1]
		if !isStringOrNumber(a) || !isStringOrNumber(b) {
			mm := L.GetMetaField(a, "__concat")
			if mm == lua.LNil {
				mm = L.GetMetaField(b, "__concat")
			}
			if mm == lua.LNil {
				bad, desc := a, descs[top-2]
				if isStringOrNumber(a) {
					bad, desc = b, descs[top-1]
				}
				L.RaiseError("attempt to concatenate %s", describe(desc, bad))
			}
			vals[top-2], descs[top-2] = call1(L, mm, a, b), ""
			top--
			continue
		}
		// Collect as many strings as possible.
		n, size := 1, len(luaToStringPlain(b))
		for n < top && isStringOrNumber(vals[top-n-1]) {
			size += len(luaToStringPlain(vals[top-n-1]))
			n++
		}
		if size > maxString {
			L.RaiseError("string length overflow")
		}
		vm.chargeBytes(L, size)
		var sb strings.Builder
		sb.Grow(size)
		for i := top - n; i < top; i++ {
			sb.WriteString(luaToStringPlain(vals[i]))
		}
		vals[top-n], descs[top-n] = lua.LString(sb.String()), ""
		top -= n - 1
	}
	L.Push(vals[0])
	return 1
}

// describe is how Lua 5.1 names a value in a type error.
func describe(desc string, v lua.LValue) string {
	if desc != "" {
		return desc + " (a " + v.Type().String() + " value)"
	}
	return "a " + v.Type().String() + " value"
}

// lengthFn(desc, v) is #v: for tables a border found in O(log n).
func (vm *luaVM) lengthFn(L *lua.LState) int {
	switch v := L.Get(2).(type) {
	case lua.LString:
		L.Push(lua.LNumber(len(v)))
		return 1
	case *lua.LTable:
		L.Push(lua.LNumber(border(v)))
		return 1
	default:
		if mm := L.GetMetaField(v, "__len"); mm != lua.LNil {
			L.Push(mm)
			L.Push(v)
			L.Call(1, 1)
			return 1
		}
		L.RaiseError("attempt to get length of %s", describe(string(L.Get(1).(lua.LString)), v))
	}
	return 0
}

// border returns a border of t (n with t[n] ~= nil and t[n+1] == nil, or 0
// if t[1] is nil), as Lua 5.1's luaH_getn, in O(log n).
func border(t *lua.LTable) int {
	j := arrayLen(t)
	if j > 0 && t.RawGetInt(j) == lua.LNil {
		return bisectBorder(t, 0, j)
	}
	if t.RawGetInt(j+1) == lua.LNil {
		return j
	}
	i := j + 1
	j = 2 * i
	for t.RawGetInt(j) != lua.LNil {
		i = j
		if j > math.MaxInt32 {
			// A pathological table: fall back to a linear search.
			k := 1
			for t.RawGetInt(k) != lua.LNil {
				k++
			}
			return k - 1
		}
		j *= 2
	}
	return bisectBorder(t, i, j)
}

// bisectBorder finds a border of t between i and j by binary search, given
// t[i] ~= nil (or i == 0) and t[j] == nil.
func bisectBorder(t *lua.LTable, i, j int) int {
	for j-i > 1 {
		m := (i + j) / 2
		if t.RawGetInt(m) == lua.LNil {
			j = m
		} else {
			i = m
		}
	}
	return i
}

// indexKey(t, k) returns k, for t[k] = v: it charges the nil slots
// gopher-lua would append before k and refuses nil and NaN keys.
func (vm *luaVM) indexKey(L *lua.LState) int {
	k := L.Get(2)
	if t, ok := L.Get(1).(*lua.LTable); ok {
		if mt, ok := t.Metatable.(*lua.LTable); !ok || mt.RawGetString("__newindex") == lua.LNil {
			checkKey(L, k, true)
		}
		vm.chargeGap(L, arrayLen(t), k)
	}
	L.SetTop(2)
	return 1
}

// indexKeyNew(k, n) is indexKey for a key of a table constructor that has
// stored n positional values so far.
func (vm *luaVM) indexKeyNew(L *lua.LState) int {
	k := L.Get(1)
	checkKey(L, k, true)
	vm.chargeGap(L, int(L.Get(2).(lua.LNumber)), k)
	L.SetTop(1)
	return 1
}

// chargeValues(...) returns its arguments, charging for the table slots
// they will fill ({...}, {f()}).
func (vm *luaVM) chargeValues(L *lua.LState) int {
	n := L.GetTop()
	vm.chargeBytes(L, n*16)
	return n
}
