package acl

import (
	"strings"

	"github.com/kvorum/kvorum/internal/glob"
)

// Denial is the outcome of a permission check: Allowed or why not
// (Redis's ACL_OK and ACL_DENIED_*, with their values).
type Denial uint8

const (
	Allowed       Denial = 0
	DeniedCommand Denial = 1 // the command or subcommand is not allowed
	DeniedKey     Denial = 2 // a key the command names is not allowed
	DeniedAuth    Denial = 3 // a failed AUTH/HELLO (ACL LOG entries only)
	DeniedChannel Denial = 4 // a channel the command names is not allowed
)

// NoPerm is the error reply (without its leading '-') of a command
// refused by the ACL check before it runs (processCommand); cmdName is
// the command's full name ("config|get").
func (d Denial) NoPerm(cmdName string) string {
	switch d {
	case DeniedCommand:
		return "NOPERM this user has no permissions to run the '" + cmdName + "' command"
	case DeniedKey:
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	case DeniedChannel:
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
	return "ERR no permission"
}

// Message is getAclErrorMessage: a script's refused call is the error
// "The user executing the script " + Message().
func (d Denial) Message() string {
	switch d {
	case DeniedCommand:
		return "can't run this command or subcommand"
	case DeniedKey:
		return "can't access at least one of the keys mentioned in the command arguments"
	case DeniedChannel:
		return "can't publish to the channel mentioned in the command"
	}
	return "lacking the permissions for the command"
}

// ExecNoPerm is EXEC's error for a queued command that the ACLs refuse
// when EXEC runs it (multi.c), without the leading '-'.
func (d Denial) ExecNoPerm() string {
	reason := "no permission"
	switch d {
	case DeniedCommand:
		reason = "no permission to execute the command or subcommand"
	case DeniedKey:
		reason = "no permission to touch the specified keys"
	case DeniedChannel:
		reason = "no permission to access one of the channels used as arguments"
	}
	return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + reason
}

// LogReason is the reason field of an ACL LOG entry.
func (d Denial) LogReason() string {
	switch d {
	case DeniedCommand:
		return "command"
	case DeniedKey:
		return "key"
	case DeniedChannel:
		return "channel"
	case DeniedAuth:
		return "auth"
	}
	return "unknown"
}

// KeyFlags are the key-spec flags that ACL key checks look at: Redis's
// CMD_KEY_ACCESS (needs read permission) and CMD_KEY_INSERT,
// CMD_KEY_DELETE, CMD_KEY_UPDATE (need write permission). The RO, RW, OW
// and RM flags do not take part (ACLSelectorCheckKey): a key with none of
// these four (EXISTS's, flagged RO only) matches any pattern, %R~ or %W~.
type KeyFlags uint8

const (
	KeyAccess KeyFlags = 1 << iota
	KeyInsert
	KeyDelete
	KeyUpdate
)

// KeyFlagsOf converts key-spec flag names as COMMAND INFO and COMMAND
// GETKEYSANDFLAGS give them ("RW", "access", "update", ...).
func KeyFlagsOf(names ...string) KeyFlags {
	var f KeyFlags
	for _, n := range names { // EqualFold: no allocation
		switch {
		case strings.EqualFold(n, "access"):
			f |= KeyAccess
		case strings.EqualFold(n, "insert"):
			f |= KeyInsert
		case strings.EqualFold(n, "delete"):
			f |= KeyDelete
		case strings.EqualFold(n, "update"):
			f |= KeyUpdate
		}
	}
	return f
}

func (f KeyFlags) perm() uint8 {
	var p uint8
	if f&KeyAccess != 0 {
		p |= permRead
	}
	if f&(KeyInsert|KeyDelete|KeyUpdate) != 0 {
		p |= permWrite
	}
	return p
}

// KeyRef is one key of a command: its position in the arguments (the
// command name at 0) and its key-spec flags.
type KeyRef struct {
	Pos   int
	Flags KeyFlags
}

// KeySource finds the keys of a command, as Redis's
// getKeysFromCommandWithSpecs (GET_KEYSPEC_DEFAULT): nil when the command
// has none or its arguments do not give them. The checks call it at
// most once, and only when a selector restricts keys; the slice may be
// the source's own buffer (it is not kept).
type KeySource interface {
	Keys(cmd *Command, args [][]byte) []KeyRef
}

// checker carries one check's lazily found keys across selectors (Redis's
// aclKeyResultCache).
type checker struct {
	cmd  *Command
	args [][]byte
	src  KeySource
	keys []KeyRef
	got  bool
}

func (c *checker) keyRefs() []KeyRef {
	if !c.got {
		c.got = true
		if c.src != nil {
			c.keys = c.src.Keys(c.cmd, c.args)
		}
	}
	return c.keys
}

// checkKey is ACLSelectorCheckKey.
func (s *selector) checkKey(key []byte, f KeyFlags) bool {
	if s.allKeys {
		return true
	}
	want := f.perm()
	for i := range s.keys {
		k := &s.keys[i]
		if k.perm&want != want {
			continue
		}
		if glob.Match(k.pat, key, false) {
			return true
		}
	}
	return false
}

// checkChannel is ACLCheckChannelAgainstList (without the allchannels
// test): a pattern subscription must name an allowed pattern literally.
func (s *selector) checkChannel(ch []byte, isPattern bool) bool {
	for i, p := range s.channels {
		if isPattern {
			if p == string(ch) {
				return true
			}
		} else if glob.Match(s.chanBytes[i], ch, false) {
			return true
		}
	}
	return false
}

// check is ACLSelectorCheckCmd.
func (s *selector) check(c *checker) (Denial, int) {
	cmd, args := c.cmd, c.args
	if !s.allCommands && !cmd.NoAuth && !s.bit(cmd.ID) {
		fa := s.firstArgs[cmd.ID]
		idx := 1
		if cmd.Parent != nil {
			idx = 2
		}
		if len(args) < 2 || fa == nil || idx >= len(args) {
			return DeniedCommand, 0
		}
		ok := false
		for _, a := range fa {
			if strings.EqualFold(string(args[idx]), a) {
				ok = true
				break
			}
		}
		if !ok {
			return DeniedCommand, 0
		}
	}
	if !s.allKeys {
		for _, k := range c.keyRefs() {
			if k.Pos < 0 || k.Pos >= len(args) {
				continue
			}
			if !s.checkKey(args[k.Pos], k.Flags) {
				return DeniedKey, k.Pos
			}
		}
	}
	if !s.allChannels && cmd.channels != noChannels {
		stop := len(args)
		if cmd.channels == publishChannel {
			stop = min(2, stop)
		}
		for i := 1; i < stop; i++ {
			if !s.checkChannel(args[i], cmd.channels == subscribePattern) {
				return DeniedChannel, i
			}
		}
	}
	return Allowed, 0
}

// Check reports whether the user may run cmd with args (the command name
// at 0, as Redis's argv) and, when not, why and at which argument (the
// key or channel refused; 0 for a refused command). It is Redis's
// ACLCheckAllUserCommandPerm: the command passes if one selector allows
// it; otherwise the denial reported is the most severe (channel over key
// over command), the last position on a tie. keys may be nil for
// commands without keys. For a user whose selector allows all commands,
// keys and channels, Check does not allocate and does not call keys.
func (u *User) Check(cmd *Command, args [][]byte, keys KeySource) (Denial, int) {
	return u.load().check(cmd, args, keys)
}

func (st *state) check(cmd *Command, args [][]byte, keys KeySource) (Denial, int) {
	c := checker{cmd: cmd, args: args, src: keys}
	relevant, last := DeniedCommand, 0
	for _, s := range st.selectors {
		d, idx := s.check(&c)
		if d == Allowed {
			return Allowed, 0
		}
		if d > relevant || d == relevant && idx > last {
			relevant, last = d, idx
		}
	}
	return relevant, last
}

// CheckKey is ACLUserCheckKeyPerm: whether some selector lets the user
// touch key with the given key-spec flags (for keys a command finds at
// run time, such as SORT's BY and GET patterns, or MIGRATE's).
func (u *User) CheckKey(key []byte, flags KeyFlags) bool {
	for _, s := range u.load().selectors {
		if s.checkKey(key, flags) {
			return true
		}
	}
	return false
}

// CheckChannel is ACLUserCheckChannelPerm: whether some selector lets the
// user publish or subscribe to channel (isPattern: channel is a
// PSUBSCRIBE pattern, which must be allowed literally).
func (u *User) CheckChannel(channel []byte, isPattern bool) bool {
	for _, s := range u.load().selectors {
		if s.allChannels || s.checkChannel(channel, isPattern) {
			return true
		}
	}
	return false
}

// CheckUnrestrictedKeys is ACLUserCheckCmdWithUnrestrictedKeyAccess:
// whether one selector both allows the command and grants flags on every
// key (allkeys, or a "*" pattern with those permissions). SORT uses it
// for BY and GET patterns.
func (u *User) CheckUnrestrictedKeys(cmd *Command, args [][]byte, keys KeySource, flags KeyFlags) bool {
	c := checker{cmd: cmd, args: args, src: keys}
	want := flags.perm()
	for _, s := range u.load().selectors {
		if d, _ := s.check(&c); d != Allowed {
			continue
		}
		if s.allKeys {
			return true
		}
		for _, k := range s.keys {
			if k.perm&want == want && k.pattern == "*" {
				return true
			}
		}
	}
	return false
}
