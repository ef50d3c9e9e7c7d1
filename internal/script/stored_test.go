package script

import "testing"

func TestStoredRoundTrip(t *testing.T) {
	l := &Stored{Code: []byte("#!lua name=x\n..."), Funcs: []Function{{Name: "a", Flags: 3}, {Name: "b", Description: "d", HasDescription: true}}}
	got, err := DecodeStored(l.Encode())
	if err != nil || string(got.Code) != string(l.Code) || len(got.Funcs) != 2 || got.Funcs[0] != l.Funcs[0] || got.Funcs[1] != l.Funcs[1] {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := DecodeStored([]byte{5, 'a'}); err == nil {
		t.Fatal("truncated record decoded")
	}
}
