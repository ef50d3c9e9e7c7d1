package resp

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/cmdspec"
)

// TestKeyBufferFastPathIsTheSpecs: the keys KeyBuffer finds from its
// fixed-position table are those the key specs give (cmdspec.KeysWithFlags), for
// every command in the table and argument counts from 1 to 7.
func TestKeyBufferFastPathIsTheSpecs(t *testing.T) {
	if len(fixedKeySpecs) < 100 {
		t.Fatalf("only %d commands have fixed key specs", len(fixedKeySpecs))
	}
	cmds := ACLCommands(nil)
	var kb KeyBuffer
	names := []string{"set"}
	for name := range fixedKeySpecs {
		names = append(names, name)
	}
	for _, name := range names {
		cmd := cmds.LookupName(name)
		if cmd == nil {
			continue
		}
		for n := 1; n <= 8; n++ {
			args := [][]byte{[]byte(name)}
			for i := 1; i < n; i++ {
				args = append(args, []byte(fmt.Sprintf("a%d", i)))
			}
			if n == 8 {
				args[len(args)-1] = []byte("GeT") // SET's GET option
			}
			got := slices.Clone(kb.Keys(cmd, args))
			refs, _ := cmdspec.KeysWithFlags(name, args)
			var want []acl.KeyRef
			for _, r := range refs {
				want = append(want, acl.KeyRef{Pos: r.Pos, Flags: acl.KeyFlagsOf(r.Flags...)})
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("%s with %d arguments: fast %v, specs %v", name, n-1, got, want)
			}
		}
	}
}

func BenchmarkKeyBuffer(b *testing.B) {
	cmds := ACLCommands(nil)
	for _, args := range [][][]byte{{[]byte("GET"), []byte("key:1")}, {[]byte("SET"), []byte("key:1"), []byte("v")}} {
		cmd := cmds.LookupName(string(args[0]))
		var kb KeyBuffer
		b.Run(string(args[0]), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				kb.Keys(cmd, args)
			}
		})
	}
}
