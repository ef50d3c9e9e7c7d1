package script

import (
	"encoding/binary"
	"errors"
)

// Stored is a library as kv keeps it in the replicated keyspace: its code
// (FUNCTION LOAD's payload) and the functions its body registered when it
// was loaded, so that FUNCTION LIST and FCALL need not run the body. The
// encoding is kv's storage format: change it only with a migration.
type Stored struct {
	Code  []byte
	Funcs []Function
}

// Encode returns the record kv stores a library as.
func (l *Stored) Encode() []byte {
	b := binary.AppendUvarint(nil, uint64(len(l.Code)))
	b = append(b, l.Code...)
	b = binary.AppendUvarint(b, uint64(len(l.Funcs)))
	for _, f := range l.Funcs {
		b = binary.AppendUvarint(b, uint64(len(f.Name)))
		b = append(b, f.Name...)
		if f.HasDescription {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(f.Description)))
		b = append(b, f.Description...)
		b = binary.AppendUvarint(b, f.Flags)
	}
	return b
}

// ErrBadStored is DecodeStored's error for bytes Encode did not produce.
var ErrBadStored = errors.New("corrupt function library record")

// DecodeStored decodes a record Encode produced.
func DecodeStored(b []byte) (*Stored, error) {
	bytesField := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	l := &Stored{}
	code, ok := bytesField()
	if !ok {
		return nil, ErrBadStored
	}
	l.Code = append([]byte(nil), code...)
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, ErrBadStored
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		name, ok := bytesField()
		if !ok || len(b) == 0 {
			return nil, ErrBadStored
		}
		f := Function{Name: string(name), HasDescription: b[0] == 1}
		b = b[1:]
		desc, ok := bytesField()
		if !ok {
			return nil, ErrBadStored
		}
		f.Description = string(desc)
		fl, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, ErrBadStored
		}
		b = b[k:]
		f.Flags = fl
		l.Funcs = append(l.Funcs, f)
	}
	return l, nil
}
