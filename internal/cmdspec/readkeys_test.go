package cmdspec

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadKeys(t *testing.T) {
	split := func(s string) [][]byte {
		var out [][]byte
		for _, f := range strings.Fields(s) {
			out = append(out, []byte(f))
		}
		return out
	}
	for _, c := range []struct {
		cmd  string
		want string // the keys, space-separated; "-": no reader
	}{
		{"getdel k", "k"},
		{"set k v", ""},
		{"set k v nx get", "k"},
		{"sunionstore d a b", "a b"},
		{"bitop and d a b", "a b"},
		{"pfmerge d a b", "d a b"},
		{"zunionstore d 2 a b weights 1 2", "a b"},
		{"zunionstore d 3 a b", ""},
		{"zunionstore d x a b", ""},
		{"zrangestore d s 0 -1", "s"},
		{"sort k by x store d", "k"},
		{"del k", "-"},
		{"get k", "-"},
	} {
		args := split(c.cmd)
		f := ReadKeys(string(args[0]))
		if c.want == "-" {
			if f != nil {
				t.Errorf("%s: has a reader", c.cmd)
			}
			continue
		}
		if f == nil {
			t.Errorf("%s: no reader", c.cmd)
			continue
		}
		var got []string
		for _, k := range f(args) {
			got = append(got, string(k))
		}
		if want := strings.Fields(c.want); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Errorf("%s: keys %q, want %q", c.cmd, got, want)
		}
	}
}
