package rdb

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"testing"
)

// A diffCase builds key "k" with ordinary commands.
type diffCase struct {
	name string
	cmds [][]any
	// exact: EncodeDump of the value read with commands is Redis's DUMP
	// byte for byte. Whatever exact says, EncodeDump of the decoded DUMP
	// is the DUMP (the decoded value keeps Redis's order of a hashtable's
	// members) unless lossy (deleted stream entries are not in a Value).
	exact bool
	lossy bool
}

func cmd(args ...any) []any { return args }

func rpush(key string, elems ...string) []any {
	c := []any{"RPUSH", key}
	for _, e := range elems {
		c = append(c, e)
	}
	return c
}

func sadd(key string, elems ...string) []any {
	c := []any{"SADD", key}
	for _, e := range elems {
		c = append(c, e)
	}
	return c
}

func seq(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func repeat(s string, n int) string { return string(bytes.Repeat([]byte(s), n)) }

func diffCases() []diffCase {
	rng := rand.New(rand.NewSource(7))
	random := make([]byte, 1000)
	rng.Read(random)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	var cases []diffCase
	for _, s := range []string{"0", "-1", "123", "-129", "40000", "2147483647", "2147483648", "-2147483648", "12345678901", "9223372036854775807", "007", "-0", " 1", "1.5", "", "x",
		repeat("a", 20), repeat("a", 21), repeat("a", 100), repeat("abc", 50), repeat("hello world ", 300), repeat("0123456789", 2000), string(random), string(binary)} {
		cases = append(cases, diffCase{"string " + strconv.Quote(s[:min(len(s), 12)]) + fmt.Sprint(len(s)), [][]any{cmd("SET", "k", s)}, true, false})
	}
	hsetSmall := []any{"HSET", "k", "a", "1", "b", "hello", "123", "-5", "f", ""}
	hset512 := []any{"HSET", "k"}
	for i := 0; i < 512; i++ {
		hset512 = append(hset512, fmt.Sprintf("field%d", i), strconv.Itoa(i*1000))
	}
	hset513 := append(append([]any{}, hset512...), "one-more", "v")
	zsmall := []any{"ZADD", "k", "1", "a", "-0.5", "b", "1e300", "c", "inf", "d", "-inf", "e", "3.0", "f", "0.1", "g", "1", "aa", "1e19", "h", "-0", "i", "4611686018427387904", "j", "2.5e-10", "l", "123456789012", "m"}
	z129 := []any{"ZADD", "k"}
	for i := 0; i < 129; i++ {
		z129 = append(z129, strconv.Itoa(i%7), fmt.Sprintf("m%d", i))
	}
	cases = append(cases,
		diffCase{"list small", [][]any{rpush("k", "1", "2", "3", "-5", "100000", "abc", "", "007", "9223372036854775807")}, true, false},
		diffCase{"list strings over 8KiB", [][]any{rpush("k", seq("element-%d", 3000)...)}, true, false},
		diffCase{"list ints", [][]any{rpush("k", seq("%d", 5000)...)}, true, false},
		diffCase{"list big element", [][]any{rpush("k", "a", repeat("x", 10000), "b", repeat("yz", 5000), "c")}, true, false},
		diffCase{"list lpush", [][]any{cmd("LPUSH", "k", "a", "b", "c")}, true, false},
		diffCase{"set intset", [][]any{sadd("k", "3", "1", "2", "-7")}, true, false},
		diffCase{"set intset 32", [][]any{sadd("k", "-5", "70000")}, true, false},
		diffCase{"set intset 64", [][]any{sadd("k", "1", "1099511627776")}, true, false},
		diffCase{"set intset 512", [][]any{sadd("k", seq("%d", 512)...)}, true, false},
		diffCase{"set 513 ints", [][]any{sadd("k", seq("%d", 513)...)}, false, false},
		diffCase{"set strings", [][]any{sadd("k", "a", "1", "b")}, false, false},
		diffCase{"set non-canonical", [][]any{sadd("k", "1", "007")}, false, false},
		diffCase{"hash small", [][]any{hsetSmall}, true, false},
		diffCase{"hash 512", [][]any{hset512}, true, false},
		diffCase{"hash 513", [][]any{hset513}, false, false},
		diffCase{"hash value 64", [][]any{cmd("HSET", "k", "f", repeat("v", 64))}, true, false},
		diffCase{"hash value 65", [][]any{cmd("HSET", "k", "f", repeat("v", 65))}, false, false},
		diffCase{"zset small", [][]any{zsmall}, true, false},
		diffCase{"zset ties", [][]any{cmd("ZADD", "k", "1", "b", "1", "a", "1", "c", "0", "z")}, true, false},
		diffCase{"zset 129", [][]any{z129}, true, false},
		diffCase{"zset long member", [][]any{cmd("ZADD", "k", "1", repeat("m", 65), "2", "x")}, true, false},
		diffCase{"stream simple", [][]any{
			cmd("XADD", "k", "1-1", "a", "1", "b", "2"),
			cmd("XADD", "k", "1-2", "a", "3", "b", "4"),
			cmd("XADD", "k", "2-0", "c", "hello"),
			cmd("XADD", "k", "2-5", "a", "x", "b", "y"),
		}, true, false},
		diffCase{"stream deletions", [][]any{
			cmd("XADD", "k", "1-1", "a", "1"),
			cmd("XADD", "k", "1-2", "a", "2"),
			cmd("XADD", "k", "1-3", "a", "3"),
			cmd("XADD", "k", "5-0", "b", "4"),
			cmd("XDEL", "k", "1-2", "5-0"),
		}, false, true},
		diffCase{"stream all deleted", [][]any{
			cmd("XADD", "k", "1-1", "a", "1"),
			cmd("XDEL", "k", "1-1"),
			cmd("XSETID", "k", "10-0"),
		}, true, false},
		diffCase{"stream groups", [][]any{
			cmd("XADD", "k", "1-1", "a", "1"),
			cmd("XADD", "k", "1-2", "a", "2"),
			cmd("XADD", "k", "1-3", "a", "3"),
			cmd("XADD", "k", "1-4", "a", "4", "b", "5"),
			cmd("XGROUP", "CREATE", "k", "g1", "0"),
			cmd("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "k", ">"),
			cmd("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "1", "STREAMS", "k", ">"),
			cmd("XACK", "k", "g1", "1-1"),
			cmd("XGROUP", "CREATE", "k", "g0", "$"),
			cmd("XGROUP", "CREATECONSUMER", "k", "g0", "carol"),
			cmd("XGROUP", "CREATE", "k", "g2", "1-2", "ENTRIESREAD", "2"),
			cmd("XCLAIM", "k", "g1", "bob", "0", "1-2"),
		}, true, false},
	)
	// Randomized cases (fixed seed): lengths around the listpack and
	// node limits, random scores.
	for i := 0; i < 6; i++ {
		var elems []string
		for j := 0; j < 40+rng.Intn(200); j++ {
			switch rng.Intn(4) {
			case 0:
				elems = append(elems, strconv.FormatInt(rng.Int63n(1<<40)-1<<39, 10))
			case 1:
				elems = append(elems, repeat(string(rune('a'+rng.Intn(26))), rng.Intn(70)))
			case 2:
				elems = append(elems, repeat("q", 4000+rng.Intn(200)))
			default:
				b := make([]byte, rng.Intn(300))
				rng.Read(b)
				elems = append(elems, string(b))
			}
		}
		cases = append(cases, diffCase{fmt.Sprintf("list random %d", i), [][]any{rpush("k", elems...)}, true, false})
		z := []any{"ZADD", "k"}
		h := []any{"HSET", "k"}
		for j := 0; j < 1+rng.Intn(140); j++ {
			var score string
			switch rng.Intn(3) {
			case 0:
				score = strconv.FormatInt(rng.Int63n(2000)-1000, 10)
			case 1:
				score = strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.Intn(40)-20)), 'g', -1, 64)
			default:
				score = strconv.FormatFloat(float64(rng.Int63()), 'g', -1, 64)
			}
			z = append(z, score, fmt.Sprintf("member%d", rng.Intn(1000)))
			h = append(h, fmt.Sprintf("f%d", j), repeat("v", rng.Intn(66)))
		}
		cases = append(cases, diffCase{fmt.Sprintf("zset random %d", i), [][]any{z}, true, false})
		cases = append(cases, diffCase{name: fmt.Sprintf("hash random %d", i), cmds: [][]any{h}, exact: true})
	}
	big := [][]any{}
	for i := 0; i < 250; i++ {
		big = append(big, cmd("XADD", "k", fmt.Sprintf("%d-%d", 1000+i/3, i%3), "field", strconv.Itoa(i), "other", repeat("v", i%50)))
	}
	for i := 0; i < 20; i++ {
		big = append(big, cmd("XADD", "k", "*", "payload", repeat("p", 900), "n", strconv.Itoa(i)))
	}
	cases = append(cases, diffCase{"stream big", big, true, false})
	return cases
}

func TestDifferentialRedis(t *testing.T) {
	c, _ := startRedis(t)
	ctx := context.Background()
	for _, tc := range diffCases() {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for _, cm := range tc.cmds {
				if err := c.Do(ctx, cm...).Err(); err != nil {
					t.Fatalf("%v: %v", cm, err)
				}
			}
			want, err := fetchValue(ctx, c, "k")
			if err != nil {
				t.Fatal(err)
			}
			dumpStr, err := c.Dump(ctx, "k").Result()
			if err != nil {
				t.Fatal(err)
			}
			dump := []byte(dumpStr)
			// (a) our decoding of Redis's DUMP.
			got, err := DecodeDump(dump)
			if err != nil {
				t.Fatalf("DecodeDump: %v (payload %x)", err, dump[:min(len(dump), 200)])
			}
			if d := diffValues(got, want); d != "" {
				t.Fatalf("DecodeDump differs from Redis's value:\n%s", d)
			}
			// (b) our encoding against Redis's.
			enc, err := EncodeDump(got, EncodeOptions{Compress: true})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.lossy {
				sameBytes(t, "EncodeDump(DecodeDump(DUMP))", enc, dump)
			}
			if tc.exact {
				fromCmds, err := EncodeDump(want, EncodeOptions{Compress: true})
				if err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "EncodeDump(value read with commands)", fromCmds, dump)
			}
			back, err := DecodeDump(enc)
			if err != nil {
				t.Fatalf("DecodeDump(EncodeDump): %v", err)
			}
			if d := diffValues(back, want); d != "" {
				t.Fatalf("round trip differs:\n%s", d)
			}
			// (c) Redis restores our payload (compressed or not) to the same value.
			for _, compress := range []bool{true, false} {
				enc, err := EncodeDump(got, EncodeOptions{Compress: compress})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Do(ctx, "RESTORE", "k2", 0, string(enc), "REPLACE").Err(); err != nil {
					t.Fatalf("RESTORE: %v", err)
				}
				restored, err := fetchValue(ctx, c, "k2")
				if err != nil {
					t.Fatal(err)
				}
				if d := diffValues(restored, want); d != "" {
					t.Fatalf("restored value differs (compress %v):\n%s", compress, d)
				}
			}
		})
	}
}

func sameBytes(t *testing.T, what string, enc, dump []byte) {
	t.Helper()
	if bytes.Equal(enc, dump) {
		return
	}
	i := 0
	for i < len(enc) && i < len(dump) && enc[i] == dump[i] {
		i++
	}
	lo := max(0, i-16)
	t.Fatalf("%s differs from DUMP at byte %d (lengths %d, %d):\nours  %s\nredis %s", what, i, len(enc), len(dump),
		hex.EncodeToString(enc[lo:min(len(enc), i+48)]), hex.EncodeToString(dump[lo:min(len(dump), i+48)]))
}
