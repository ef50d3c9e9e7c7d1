package rdb

import "errors"

// Version is the RDB version of what this package writes (Redis 7.0's).
const Version = 10

// EncodeOptions choose the encodings written, as Redis's configuration
// does (hash-max-listpack-entries and so on): a value within the limits is
// written in Redis's small encoding, byte for byte what Redis 7.0 writes
// for it; a larger one in the general encoding. The zero value means
// Redis's defaults, except Compress: Redis compresses by default
// (rdbcompression yes), so a payload identical to Redis's DUMP needs
// Compress set.
type EncodeOptions struct {
	HashMaxListpackEntries int64 // default 512 (Redis 7.0's hash-max-listpack-entries)
	HashMaxListpackValue   int64 // default 64
	ZSetMaxListpackEntries int64 // default 128
	ZSetMaxListpackValue   int64 // default 64
	SetMaxIntsetEntries    int64 // default 512
	ListMaxListpackSize    int64 // default -2 (8 KiB per node)
	Compress               bool  // LZF-compress strings longer than 20 bytes, as rdbcompression yes (default in Redis) does
}

// ErrPayload is the error of a DUMP payload that is too short or whose
// version or checksum is wrong; RESTORE answers it as Redis does:
// "ERR DUMP payload version or checksum are wrong".
var ErrPayload = errors.New("DUMP payload version or checksum are wrong")

// ErrFormat is the error of a payload or file whose checksum is right but
// whose content cannot be parsed ("Bad data format" in Redis).
var ErrFormat = errors.New("Bad data format")

// Entry is one key of an RDB file.
type Entry struct {
	DB       int
	Key      []byte
	Value    *Value
	ExpireMs int64 // absolute Unix ms; 0: no expiry
	Idle     int64 // LRU idle seconds, -1 if not recorded
	Freq     int   // LFU frequency, -1 if not recorded
}
