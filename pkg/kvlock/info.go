package kvlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// LockInfo is the reply of LOCK INFO.
type LockInfo struct {
	Mode    string   // "free", "exclusive" or "shared"
	Token   int64    // the latest grant's token, 0 if never granted
	Holders []Holder // current holders
	Waiters int64    // queue length
}

// Holder is one holder of a lock.
type Holder struct {
	Lease int64
	Token int64
}

// Info reads a lock's state (LOCK INFO name). It needs no session.
func Info(ctx context.Context, c Client, name string) (LockInfo, error) {
	cmd := c.Do(ctx, "LOCK", "INFO", name)
	if err := cmd.Err(); err != nil {
		return LockInfo{}, fmt.Errorf("kvlock: LOCK INFO %q: %w", name, err)
	}
	info, err := parseInfo(cmd.Val())
	if err != nil {
		return LockInfo{}, fmt.Errorf("kvlock: LOCK INFO %q: %w (reply %v)", name, err, cmd.Val())
	}
	return info, nil
}

// parseInfo reads the flat field/value array (RESP2) or the map a RESP3
// server may send instead.
func parseInfo(v any) (LockInfo, error) {
	var info LockInfo
	fields := map[string]any{}
	switch r := v.(type) {
	case []any:
		if len(r)%2 != 0 {
			return info, fmt.Errorf("odd number of elements (%d)", len(r))
		}
		for i := 0; i < len(r); i += 2 {
			k, ok := r[i].(string)
			if !ok {
				return info, fmt.Errorf("field name %v is not a string", r[i])
			}
			fields[k] = r[i+1]
		}
	case map[any]any:
		for k, val := range r {
			ks, ok := k.(string)
			if !ok {
				return info, fmt.Errorf("field name %v is not a string", k)
			}
			fields[ks] = val
		}
	default:
		return info, fmt.Errorf("not an array but %T", v)
	}
	var err error
	if m, ok := fields["mode"].(string); ok {
		info.Mode = m
	} else {
		return info, fmt.Errorf("no mode")
	}
	if info.Token, err = asInt(fields["token"]); err != nil {
		return info, fmt.Errorf("token: %w", err)
	}
	if info.Waiters, err = asInt(fields["waiters"]); err != nil {
		return info, fmt.Errorf("waiters: %w", err)
	}
	hs, ok := fields["holders"].([]any)
	if !ok && fields["holders"] != nil {
		return info, fmt.Errorf("holders is %T, not an array", fields["holders"])
	}
	for _, h := range hs {
		pair, ok := h.([]any)
		if !ok || len(pair) != 2 {
			return info, fmt.Errorf("holder %v is not a [lease, token] pair", h)
		}
		var hd Holder
		if hd.Lease, err = asInt(pair[0]); err != nil {
			return info, fmt.Errorf("holder lease: %w", err)
		}
		if hd.Token, err = asInt(pair[1]); err != nil {
			return info, fmt.Errorf("holder token: %w", err)
		}
		info.Holders = append(info.Holders, hd)
	}
	return info, nil
}

func asInt(v any) (int64, error) {
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal(v)
	return cmd.Int64() // accepts int64 and numeric strings, like go-redis does for replies
}
