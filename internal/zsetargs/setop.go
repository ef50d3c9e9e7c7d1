package zsetargs

import (
	"math"
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// The operations of SetOp.
const (
	Union = iota
	Inter
	Diff
)

// The aggregates of SetOpOptions.
const (
	Sum = iota
	Min
	Max
)

// SetOp is a parsed ZUNION, ZINTER, ZDIFF, their STORE forms or
// ZINTERCARD: which operation and its number of keys.
type SetOp struct {
	Op       int // Union, Inter, Diff
	NumIdx   int // position of numkeys; the keys follow it
	NumKeys  int
	Store    bool
	CardOnly bool // ZINTERCARD
}

// ParseSetOp parses numkeys, as Redis does before it looks at the keys.
func ParseSetOp(args [][]byte) (SetOp, reply.Reply, bool) {
	name := strings.ToLower(string(args[0]))
	o := SetOp{NumIdx: 1}
	switch name {
	case "zunionstore":
		o.Op, o.NumIdx, o.Store = Union, 2, true
	case "zinterstore":
		o.Op, o.NumIdx, o.Store = Inter, 2, true
	case "zdiffstore":
		o.Op, o.NumIdx, o.Store = Diff, 2, true
	case "zunion":
		o.Op = Union
	case "zinter":
		o.Op = Inter
	case "zdiff":
		o.Op = Diff
	case "zintercard":
		o.Op, o.CardOnly = Inter, true
	}
	n, ok := redisnum.ParseInt(args[o.NumIdx])
	if !ok {
		return o, errNotInteger, false
	}
	if n < 1 {
		return o, reply.Error("ERR at least 1 input key is needed for '" + name + "' command"), false
	}
	if n > int64(len(args)-(o.NumIdx+1)) {
		return o, errSyntax, false
	}
	o.NumKeys = int(n)
	return o, reply.Reply{}, true
}

// SetOpOptions are the options after a SetOp's keys.
type SetOpOptions struct {
	Weights    []float64 // nil: all 1
	Agg        int       // Sum, Min, Max
	WithScores bool
	Limit      int64 // ZINTERCARD's; 0: none
}

// ParseOptions parses the options after o's keys (WEIGHTS, AGGREGATE,
// WITHSCORES, LIMIT as the command takes them), which Redis reads after
// it has checked the keys' types.
func (o SetOp) ParseOptions(args [][]byte) (SetOpOptions, reply.Reply, bool) {
	var p SetOpOptions
	j := o.NumIdx + 1 + o.NumKeys
	for remaining := len(args) - j; remaining > 0; remaining = len(args) - j {
		a := args[j]
		switch {
		case o.Op != Diff && !o.CardOnly && remaining >= o.NumKeys+1 && eq(a, "weights"):
			j++
			p.Weights = make([]float64, o.NumKeys)
			for i := range p.Weights {
				w, ok := redisnum.ParseDouble(args[j])
				if !ok {
					return p, errWeight, false
				}
				p.Weights[i] = w
				j++
			}
		case o.Op != Diff && !o.CardOnly && remaining >= 2 && eq(a, "aggregate"):
			switch v := args[j+1]; {
			case eq(v, "sum"):
				p.Agg = Sum
			case eq(v, "min"):
				p.Agg = Min
			case eq(v, "max"):
				p.Agg = Max
			default:
				return p, errSyntax, false
			}
			j += 2
		case !o.Store && !o.CardOnly && eq(a, "withscores"):
			p.WithScores = true
			j++
		case o.CardOnly && remaining >= 2 && eq(a, "limit"):
			l, ok := redisnum.ParseInt(args[j+1])
			if !ok || l < 0 {
				return p, errLimitNeg, false
			}
			p.Limit = l
			j += 2
		default:
			return p, errSyntax, false
		}
	}
	return p, reply.Reply{}, true
}

// Aggregate combines a member's score so far (target) with its weighted
// score v in one more input, as Redis's zunionInterAggregate.
func Aggregate(target, v float64, agg int) float64 {
	switch agg {
	case Min:
		if v < target {
			return v
		}
		return target
	case Max:
		if v > target {
			return v
		}
		return target
	}
	target += v
	if math.IsNaN(target) { // inf + -inf: Redis's convention is 0
		return 0
	}
	return target
}
