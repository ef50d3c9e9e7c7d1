// Package redisnum reads and writes numbers exactly as redis-server 7.0
// does, so that kvorum's replies and stored values are byte for byte
// Redis's:
//
//   - integers: ParseInt is string2ll (no sign '+', no leading zeros, no
//     spaces, "-0" refused);
//   - doubles: Strtod is glibc's strtod in the C locale (decimal and
//     hexadecimal notation, inf, nan), ParseDouble is getDoubleFromObject
//     (ZADD scores, weights, coordinates), ParseStrtod is SORT's reading
//     (strtod with its errno checks); AppendDouble is addReplyDouble's
//     "%.17g", AppendListpackDouble is a listpack's d2string (ZSCAN),
//     FormatHuman is ld2string(LD_STR_HUMAN) of a double (GEOPOS) and
//     FormatFixed4 is fixedpoint_d2string with 4 decimals (GEODIST);
//   - long doubles: INCRBYFLOAT and HINCRBYFLOAT compute in x87 extended
//     precision; ParseLongDouble (string2ld), LongDoubleInRange and
//     FormatLongDouble (ld2string(LD_STR_HUMAN)) do the same with
//     math/big at 64 bits of mantissa;
//   - timeouts: ParseTimeout is getTimeoutFromObjectOrReply's reading of
//     a blocking command's seconds into milliseconds;
//   - Sortable and Unsortable map a double to 8 bytes whose unsigned order
//     is the numeric order, for keys that must sort by score.
//
// The results must not depend on the platform: replicas compute them
// independently and must agree. The package depends on nothing but the
// standard library.
package redisnum
