package rdb

import "hash/crc64"

// Redis's CRC64 is the Jones polynomial (0xad93d23594c935a9), reflected,
// with an initial value of zero and no final xor. hash/crc64 takes the
// polynomial in reversed form and complements the value before and after,
// which crc64Update undoes.
var crcTable = crc64.MakeTable(0x95ac9329ac4bc9b5)

// crc64Update continues Redis's crc64(crc, p).
func crc64Update(crc uint64, p []byte) uint64 {
	return ^crc64.Update(^crc, crcTable, p)
}
