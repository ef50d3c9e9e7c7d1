package check

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// OpKind is the kind of a recorded operation.
type OpKind uint8

// The operation kinds and the Redis commands they stand for.
const (
	OpGet    OpKind = iota // GET key
	OpSet                  // SET key value            -> OK
	OpSetNX                // SET key value NX         -> Output.OK = applied
	OpGetSet               // SET key value GET        -> previous value (Exists/Value)
	OpDel                  // DEL key                  -> Output.Int = keys removed (0/1)
	OpIncr                 // INCR key                 -> Output.Int = new value (or Output.Err if not an integer)
	OpCAS                  // WATCH key; GET key; (if equal) MULTI; SET key new; EXEC -> Output.OK = EXEC ran
	OpAppend               // RPUSH key value          -> Output.Int = new length
	OpRead                 // LRANGE key 0 -1          -> Output.List

	// NumOpKinds is the number of operation kinds (the size of Stats.Kinds).
	NumOpKinds = int(OpRead) + 1
)

var opNames = [NumOpKinds]string{"GET", "SET", "SETNX", "GETSET", "DEL", "INCR", "CAS", "RPUSH", "LRANGE"}

func (k OpKind) String() string {
	if int(k) < NumOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// IsWrite reports whether operations of this kind may change the state
// (every kind but GET and LRANGE).
func (k OpKind) IsWrite() bool { return k != OpGet && k != OpRead }

// The error replies the model knows (Redis's texts).
const (
	ErrWrongType  = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrNotInteger = "ERR value is not an integer or out of range"
	ErrOverflow   = "ERR increment or decrement would overflow"
)

// Input is what a client asked.
type Input struct {
	Kind   OpKind `json:"kind"`
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`  // Set, SetNX, GetSet, Append; CAS: the new value
	Expect string `json:"expect,omitempty"` // CAS: the value GET must have returned (CAS is only recorded when the GET matched)
}

// Output is the reply a client got.
type Output struct {
	Exists bool     `json:"exists,omitempty"` // Get, GetSet: key existed (Value valid)
	Value  string   `json:"value,omitempty"`
	Int    int64    `json:"int,omitempty"`  // Del, Incr, Append
	OK     bool     `json:"ok,omitempty"`   // SetNX, CAS
	List   []string `json:"list,omitempty"` // Read
	// Err is a deterministic error reply that is a definite outcome with no
	// effect, e.g. INCR on a non-integer (ErrNotInteger), WRONGTYPE.
	Err string `json:"err,omitempty"`
	// Unknown is set by Pending.Unknown: the outcome is not known, the
	// model accepts any output and the operation may or may not have taken
	// effect. The other fields are meaningless then.
	Unknown bool `json:"unknown,omitempty"`
}

// stateKind is the type of the value held at a key.
type stateKind uint8

const (
	absent stateKind = iota
	str
	list
)

// keyState is the model state of one key. It is immutable: Step returns new
// states and never modifies one.
type keyState struct {
	kind stateKind
	val  string // str
	tail *cell  // list: the last element (never nil: Redis has no empty lists)
}

// cell is one element of an immutable list, linked to the element before
// it, so appending shares the whole existing list.
type cell struct {
	val  string
	prev *cell
	n    int    // length of the list ending here
	hash uint64 // order-sensitive hash of the list ending here
}

func push(tail *cell, v string) *cell {
	c := &cell{val: v, prev: tail, n: 1, hash: hashString(v)}
	if tail != nil {
		c.n = tail.n + 1
		c.hash = tail.hash*1099511628211 ^ c.hash
	}
	return c
}

// hashString is FNV-1a.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// elems returns the list as a slice, first element first.
func (c *cell) elems() []string {
	if c == nil {
		return nil
	}
	out := make([]string, c.n)
	for i := c.n - 1; c != nil; i, c = i-1, c.prev {
		out[i] = c.val
	}
	return out
}

// equalSlice reports whether the list ending at c holds exactly l.
func (c *cell) equalSlice(l []string) bool {
	n := 0
	if c != nil {
		n = c.n
	}
	if n != len(l) {
		return false
	}
	for i := n - 1; i >= 0; i, c = i-1, c.prev {
		if c.val != l[i] {
			return false
		}
	}
	return true
}

func listEqual(a, b *cell) bool {
	for a != b {
		if a == nil || b == nil || a.n != b.n || a.hash != b.hash || a.val != b.val {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

func stateEqual(a, b keyState) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case str:
		return a.val == b.val
	case list:
		return listEqual(a.tail, b.tail)
	}
	return true
}

func stateHash(s keyState) uint64 {
	switch s.kind {
	case str:
		return hashString(s.val) ^ 0x5bd1e995
	case list:
		return s.tail.hash ^ 0x9e3779b97f4a7c15
	}
	return 0
}

// parseRedisInt parses s as Redis's string2ll does: a canonical decimal
// int64 (no sign but '-', no leading zeros, no spaces, "-0" rejected).
func parseRedisInt(s string) (int64, bool) {
	if s == "0" {
		return 0, true
	}
	d := s
	if strings.HasPrefix(d, "-") {
		d = d[1:]
	}
	if d == "" || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// apply runs in on state s as Redis would: it returns the state after the
// command and the reply Redis gives (in the fields of Output that the kind
// uses).
func apply(s keyState, in Input) (keyState, Output) {
	wrong := Output{Err: ErrWrongType}
	switch in.Kind {
	case OpGet:
		switch s.kind {
		case str:
			return s, Output{Exists: true, Value: s.val}
		case list:
			return s, wrong
		}
		return s, Output{}
	case OpSet:
		return keyState{kind: str, val: in.Value}, Output{}
	case OpSetNX:
		if s.kind != absent {
			return s, Output{OK: false}
		}
		return keyState{kind: str, val: in.Value}, Output{OK: true}
	case OpGetSet:
		switch s.kind {
		case str:
			return keyState{kind: str, val: in.Value}, Output{Exists: true, Value: s.val}
		case list:
			return s, wrong
		}
		return keyState{kind: str, val: in.Value}, Output{}
	case OpDel:
		if s.kind == absent {
			return s, Output{Int: 0}
		}
		return keyState{}, Output{Int: 1}
	case OpIncr:
		var v int64
		switch s.kind {
		case list:
			return s, wrong
		case str:
			var ok bool
			if v, ok = parseRedisInt(s.val); !ok {
				return s, Output{Err: ErrNotInteger}
			}
			if v == math.MaxInt64 {
				return s, Output{Err: ErrOverflow}
			}
		}
		v++
		return keyState{kind: str, val: strconv.FormatInt(v, 10)}, Output{Int: v}
	case OpCAS:
		if s.kind == str && s.val == in.Expect {
			return keyState{kind: str, val: in.Value}, Output{OK: true}
		}
		return s, Output{OK: false}
	case OpAppend:
		switch s.kind {
		case str:
			return s, wrong
		case list:
			t := push(s.tail, in.Value)
			return keyState{kind: list, tail: t}, Output{Int: int64(t.n)}
		}
		return keyState{kind: list, tail: push(nil, in.Value)}, Output{Int: 1}
	case OpRead:
		switch s.kind {
		case str:
			return s, wrong
		case list:
			// The reply is compared with the state directly (see step),
			// never materialized.
			return s, Output{}
		}
		return s, Output{}
	}
	panic(fmt.Sprintf("check: unknown operation kind %d", in.Kind))
}

type errClass uint8

const (
	noErr errClass = iota
	errWrongType
	errNotInteger
	errOverflow
	errOther
)

func classOf(e string) errClass {
	switch {
	case e == "":
		return noErr
	case strings.HasPrefix(e, "WRONGTYPE"):
		return errWrongType
	case strings.Contains(e, "not an integer"):
		return errNotInteger
	case strings.Contains(e, "overflow"):
		return errOverflow
	}
	return errOther
}

// step is the model's step function on one key.
func step(s keyState, in Input, out Output) (bool, keyState) {
	if out.Unknown {
		next, _ := apply(s, in)
		return true, next
	}
	got := classOf(out.Err)
	if got == errOther {
		// A definite error without effect that the model does not know.
		return true, s
	}
	if in.Kind == OpCAS && got == noErr && !out.OK {
		// EXEC aborted by WATCH: no effect.
		return true, s
	}
	next, want := apply(s, in)
	if classOf(want.Err) != got {
		return false, s
	}
	if got != noErr {
		return true, s // the same error: no effect
	}
	switch in.Kind {
	case OpGet, OpGetSet:
		if want.Exists != out.Exists || (want.Exists && want.Value != out.Value) {
			return false, s
		}
	case OpDel, OpIncr, OpAppend:
		if want.Int != out.Int {
			return false, s
		}
	case OpSetNX, OpCAS:
		if want.OK != out.OK {
			return false, s
		}
	case OpRead:
		var tail *cell
		if s.kind == list {
			tail = s.tail
		}
		if !tail.equalSlice(out.List) {
			return false, s
		}
	}
	return true, next
}

// partition splits a history by key; partitions are in key order.
func partition(history []porcupine.Operation) (keys []string, parts [][]porcupine.Operation) {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys = make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts = make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = byKey[k]
	}
	return keys, parts
}

// Model is the sequential specification of the operations: partitioned by
// key (keys are independent), with a per-key state of absent, string or
// list (plus the unknown writes that may still take effect, see
// pending.go). It covers every OpKind; see the package documentation for
// the semantics and the handling of unknown outputs.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		_, parts := partition(history)
		return parts
	},
	Init: func() interface{} { return configs{{}} },
	StepContext: func(ctx context.Context, state, input, output interface{}) (bool, interface{}) {
		ok, next := stepConfigs(ctx, state.(configs), input.(Input), output.(Output))
		return ok, next
	},
	Equal: func(a, b interface{}) bool { return configsEqual(a.(configs), b.(configs)) },
	Hash:  func(s interface{}) uint64 { return configsHash(s.(configs)) },
	DescribeOperation: func(input, output interface{}) string {
		return describeOp(input.(Input), output.(Output))
	},
	DescribeState: func(state interface{}) string { return describeConfigs(state.(configs)) },
	DescribeOperationMetadata: func(info interface{}) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

// describeList renders a list, eliding the middle of long ones.
func describeList(l []string) string {
	const keep = 4
	if len(l) <= 2*keep {
		return "[" + strings.Join(l, " ") + "]"
	}
	return fmt.Sprintf("[%s … (%d elements) … %s]", strings.Join(l[:keep], " "), len(l), strings.Join(l[len(l)-keep:], " "))
}

func describeState(s keyState) string {
	switch s.kind {
	case str:
		return strconv.Quote(s.val)
	case list:
		// Only the last elements: states of long lists would make the
		// visualization huge.
		const keep = 6
		var last []string
		for c := s.tail; c != nil && len(last) < keep; c = c.prev {
			last = append(last, c.val)
		}
		for i, j := 0, len(last)-1; i < j; i, j = i+1, j-1 {
			last[i], last[j] = last[j], last[i]
		}
		if s.tail.n > keep {
			return fmt.Sprintf("list(%d) [… %s]", s.tail.n, strings.Join(last, " "))
		}
		return fmt.Sprintf("list(%d) [%s]", s.tail.n, strings.Join(last, " "))
	}
	return "(absent)"
}

func describeOp(in Input, out Output) string {
	if in.Value == anonValue {
		in.Value = "‹unobserved›"
	}
	var call string
	switch in.Kind {
	case OpGet, OpDel, OpIncr:
		call = fmt.Sprintf("%s %s", in.Kind, in.Key)
	case OpRead:
		call = fmt.Sprintf("LRANGE %s 0 -1", in.Key)
	case OpSetNX:
		call = fmt.Sprintf("SET %s %s NX", in.Key, in.Value)
	case OpGetSet:
		call = fmt.Sprintf("SET %s %s GET", in.Key, in.Value)
	case OpCAS:
		call = fmt.Sprintf("CAS %s %q→%q", in.Key, in.Expect, in.Value)
	default:
		call = fmt.Sprintf("%s %s %s", in.Kind, in.Key, in.Value)
	}
	var ret string
	switch {
	case out.Unknown:
		ret = "? (unknown)"
	case out.Err != "":
		ret = out.Err
	default:
		switch in.Kind {
		case OpGet, OpGetSet:
			if out.Exists {
				ret = strconv.Quote(out.Value)
			} else {
				ret = "nil"
			}
		case OpSet:
			ret = "OK"
		case OpDel, OpIncr, OpAppend:
			ret = strconv.FormatInt(out.Int, 10)
		case OpSetNX:
			ret = map[bool]string{true: "OK", false: "nil (not set)"}[out.OK]
		case OpCAS:
			ret = map[bool]string{true: "EXEC ok", false: "EXEC aborted"}[out.OK]
		case OpRead:
			ret = describeList(out.List)
		}
	}
	return call + " → " + ret
}
