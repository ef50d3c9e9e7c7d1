package redisnum

import "strconv"

// ParseInt parses b like Redis's string2ll: optional '-', then decimal
// digits without leading zeros, nothing else, within int64; "-0" is
// refused.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 || b[0] == '+' || (len(b) > 1 && b[0] == '0') || (len(b) > 1 && b[0] == '-' && b[1] == '0') || b[0] == ' ' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}
