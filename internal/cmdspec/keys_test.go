package cmdspec

import (
	"slices"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		sp   Spec
		args string
		want string
	}{
		{Spec{Name: "get", FirstKey: 1, LastKey: 1, Step: 1}, "GET k", "k"},
		{Spec{Name: "mset", FirstKey: 1, LastKey: -1, Step: 2, Write: true}, "MSET a 1 b 2", "a b"},
		{Spec{Name: "del", FirstKey: 1, LastKey: -1, Step: 1, Write: true}, "DEL a b c", "a b c"},
		{Spec{Name: "rename", FirstKey: 1, LastKey: 2, Step: 1, Write: true}, "RENAME a b", "a b"},
		{Spec{Name: "sunionstore", FirstKey: 1, LastKey: -1, Step: 1, Write: true}, "SUNIONSTORE d s1 s2", "d s1 s2"},
		{Spec{Name: "zunionstore", Write: true}, "ZUNIONSTORE d 2 a b WEIGHTS 1 2", "d a b"},
		{Spec{Name: "eval", Write: true}, "EVAL body 2 k1 k2 argv1", "k1 k2"},
		{Spec{Name: "eval", Write: true}, "EVAL body 0 argv1", ""},
		{Spec{Name: "fcall", Write: true}, "FCALL f 1 k argv", "k"},
		{Spec{Name: "sort", FirstKey: 1, LastKey: 1, Step: 1, Write: true}, "SORT s BY w_* GET o_* STORE d", "s d"},
		{Spec{Name: "xread"}, "XREAD COUNT 2 STREAMS a b 0 0", "a b"},
		{Spec{Name: "lease", FirstKey: 2, LastKey: 2, Step: 1, Write: true, Extension: true}, "LEASE GRANT x 10", "x"},
		{Spec{Name: "ping"}, "PING", ""},
	} {
		args := [][]byte{}
		for _, a := range strings.Fields(tc.args) {
			args = append(args, []byte(a))
		}
		var got []string
		for _, k := range Keys(nil, &tc.sp, args) {
			got = append(got, string(k))
		}
		if want := strings.Fields(tc.want); !slices.Equal(got, want) {
			t.Errorf("%s: keys %q, want %q", tc.args, got, want)
		}
	}
}
