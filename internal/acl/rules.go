package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
)

// Key permissions of a key pattern (Redis's ACL_READ_PERMISSION,
// ACL_WRITE_PERMISSION).
const (
	permRead  uint8 = 1 << 0
	permWrite uint8 = 1 << 1
	permAll         = permRead | permWrite
)

type keyPattern struct {
	pattern string
	pat     []byte // pattern's bytes, for matching without allocating
	perm    uint8
}

// selector is Redis's aclSelector: the root selector of a user (the rules
// outside parentheses) or one of its added selectors.
type selector struct {
	allKeys, allChannels, allCommands bool
	// future is Redis's reserved command bit USER_COMMAND_BITS_COUNT-1:
	// set by +@all/allcommands only, cleared by -@all/nocommands; it
	// decides whether the description starts with +@all or -@all.
	future    bool
	allowed   []uint64         // command bitmap, by Command.ID
	firstArgs map[int][]string // allowed first arguments of a denied command, by ID
	keys      []keyPattern     // unless allKeys
	channels  []string         // unless allChannels
	chanBytes [][]byte         // channels' bytes
	cmds      *Commands        // the universe
	_         [0]func()        // not comparable
}

func newSelector(cmds *Commands) *selector {
	return &selector{allowed: make([]uint64, cmds.words), cmds: cmds}
}

func (s *selector) clone() *selector {
	d := *s
	d.allowed = slices.Clone(s.allowed)
	d.keys = slices.Clone(s.keys)
	d.channels = slices.Clone(s.channels)
	d.chanBytes = slices.Clone(s.chanBytes)
	if s.firstArgs != nil {
		d.firstArgs = make(map[int][]string, len(s.firstArgs))
		for id, a := range s.firstArgs {
			d.firstArgs[id] = slices.Clone(a)
		}
	}
	return &d
}

func (s *selector) bit(id int) bool { return s.allowed[id/64]&(1<<(id%64)) != 0 }

func (s *selector) setBit(id int, v bool) {
	if v {
		s.allowed[id/64] |= 1 << (id % 64)
	} else {
		s.allowed[id/64] &^= 1 << (id % 64)
		s.allCommands = false
	}
}

// changePerm is ACLChangeSelectorPerm: the command's bit and those of
// its subcommands; its allowed first arguments are forgotten.
func (s *selector) changePerm(cmd *Command, allow bool) {
	s.setBit(cmd.ID, allow)
	delete(s.firstArgs, cmd.ID)
	for _, sub := range cmd.Subcommands {
		s.setBit(sub.ID, allow)
	}
}

// setCategory is ACLSetSelectorCommandBitsForCategory for one category.
func (s *selector) setCategory(cat Category, allow bool) {
	for _, cmd := range s.cmds.members(cat) {
		s.changePerm(cmd, allow)
	}
}

func (s *selector) setAll(allow bool) {
	for i := range s.allowed {
		s.allowed[i] = 0
		if allow {
			s.allowed[i] = ^uint64(0)
		}
	}
	s.allCommands, s.future = allow, allow
	s.firstArgs = nil
}

// errCode is the errno ACLSetUser/ACLSetSelector set on an error.
type errCode uint8

const (
	errNone    errCode = iota
	errNoEnt           // ENOENT
	errInval           // EINVAL
	errExist           // EEXIST
	errIsDir           // EISDIR
	errNoDev           // ENODEV
	errBadMsg          // EBADMSG
	errAlready         // EALREADY
	errChild           // ECHILD
)

// text is ACLSetUserStringError.
func (e errCode) text() string {
	switch e {
	case errNoEnt:
		return "Unknown command or category name in ACL"
	case errInval:
		return "Syntax error"
	case errExist:
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	case errIsDir:
		return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	case errNoDev:
		return "The password you are trying to remove from the user does not exist"
	case errBadMsg:
		return "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	case errAlready:
		return "Duplicate user found. A user can only be defined once in config files"
	case errChild:
		return "Allowing first-arg of a subcommand is not supported"
	}
	return "Wrong format"
}

// hasSpaces is ACLStringHasSpaces: C isspace or NUL.
func hasSpaces(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}

// cstr is what C sees of a Go string: up to its first NUL (Redis's
// strcasecmp/strrchr stop there).
func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// apply is ACLSetSelector.
func (s *selector) apply(op string) errCode {
	if op == "" {
		return errInval // an empty rule inside a selector, as ("")
	}
	c := cstr(op)
	var c1 byte
	if len(c) > 1 {
		c1 = c[1]
	}
	switch {
	case strings.EqualFold(c, "allkeys") || c == "~*":
		s.allKeys, s.keys = true, nil
	case strings.EqualFold(c, "resetkeys"):
		s.allKeys, s.keys = false, nil
	case strings.EqualFold(c, "allchannels") || c == "&*":
		s.allChannels, s.channels, s.chanBytes = true, nil, nil
	case strings.EqualFold(c, "resetchannels"):
		s.allChannels, s.channels, s.chanBytes = false, nil, nil
	case strings.EqualFold(c, "allcommands") || strings.EqualFold(c, "+@all"):
		s.setAll(true)
	case strings.EqualFold(c, "nocommands") || strings.EqualFold(c, "-@all"):
		s.setAll(false)
	case op[0] == '~' || op[0] == '%':
		if s.allKeys {
			return errExist
		}
		var perm uint8
		off := 1
		if op[0] == '%' {
			for ; off < len(op); off++ {
				b := op[off]
				if (b == 'R' || b == 'r') && perm&permRead == 0 {
					perm |= permRead
				} else if (b == 'W' || b == 'w') && perm&permWrite == 0 {
					perm |= permWrite
				} else if b == '~' {
					off++
					break
				} else {
					return errInval
				}
			}
		} else {
			perm = permAll
		}
		pat := op[off:]
		if perm == 0 {
			// "%" or "%~pat": Redis 7.0 stores a pattern without
			// permissions and then panics describing it; refused here.
			return errInval
		}
		if hasSpaces(pat) {
			return errInval
		}
		if i := slices.IndexFunc(s.keys, func(k keyPattern) bool { return k.pattern == pat }); i >= 0 {
			s.keys[i].perm |= perm
		} else {
			s.keys = append(s.keys, keyPattern{pat, []byte(pat), perm})
		}
		s.allKeys = false
	case op[0] == '&':
		if s.allChannels {
			return errIsDir
		}
		pat := op[1:]
		if hasSpaces(pat) {
			return errInval
		}
		if !slices.Contains(s.channels, pat) {
			s.channels = append(s.channels, pat)
			s.chanBytes = append(s.chanBytes, []byte(pat))
		}
		s.allChannels = false
	case c == "":
		return errInval
	case c[0] == '+' && c1 != '@':
		name := c[1:]
		i := strings.LastIndexByte(name, '|')
		if i < 0 {
			cmd := s.cmds.LookupName(name)
			if cmd == nil {
				return errNoEnt
			}
			s.changePerm(cmd, true)
			return errNone
		}
		cmd := s.cmds.LookupName(name[:i])
		if cmd == nil {
			return errNoEnt
		}
		if cmd.Parent != nil {
			return errChild
		}
		sub := name[i+1:]
		if sub == "" {
			return errInval
		}
		if cmd.subs != nil {
			sc := s.cmds.LookupName(name)
			if sc == nil {
				return errNoEnt
			}
			s.changePerm(sc, true)
			return errNone
		}
		if s.firstArgs == nil {
			s.firstArgs = map[int][]string{}
		}
		if !slices.ContainsFunc(s.firstArgs[cmd.ID], func(a string) bool { return strings.EqualFold(a, sub) }) {
			s.firstArgs[cmd.ID] = append(s.firstArgs[cmd.ID], sub)
		}
	case c[0] == '-' && c1 != '@':
		cmd := s.cmds.LookupName(c[1:])
		if cmd == nil {
			return errNoEnt
		}
		s.changePerm(cmd, false)
	case (c[0] == '+' || c[0] == '-') && c1 == '@':
		cat, ok := CategoryByName(c[2:])
		if !ok {
			return errNoEnt
		}
		s.setCategory(cat, c[0] == '+')
	default:
		return errInval
	}
	return errNone
}

// Flags of a user's description, in Redis's order (ACLUserFlags).
const (
	flagOn uint8 = 1 << iota
	flagOff
	flagNopass
	flagSkipSanitize
	flagSanitize
)

var userFlagNames = []struct {
	name string
	flag uint8
}{{"on", flagOn}, {"off", flagOff}, {"nopass", flagNopass}, {"skip-sanitize-payload", flagSkipSanitize}, {"sanitize-payload", flagSanitize}}

// state is a user's rules at one moment: Redis's user struct without the
// name. A state is never changed once published in a User.
type state struct {
	flags     uint8
	passwords []string // SHA-256 hex digests, in the order added
	selectors []*selector
	cmds      *Commands
	descOnce  sync.Once
	desc      string // the description, computed once when asked
}

// description is the state's ACLDescribeUser, computed on first use
// (Redis caches it in acl_string too).
func (st *state) description() string {
	st.descOnce.Do(func() { st.desc = st.describe() })
	return st.desc
}

func newState(cmds *Commands) *state {
	return &state{flags: flagOff, selectors: []*selector{newSelector(cmds)}, cmds: cmds}
}

func (st *state) clone() *state {
	d := &state{flags: st.flags, passwords: slices.Clone(st.passwords), cmds: st.cmds}
	for _, s := range st.selectors {
		d.selectors = append(d.selectors, s.clone())
	}
	return d
}

// HashPassword is ACLHashPassword: the lower-case hex SHA-256 of the
// password, the form passwords are kept in (and #<hash> gives).
func HashPassword(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !('a' <= h[i] && h[i] <= 'f' || '0' <= h[i] && h[i] <= '9') {
			return false
		}
	}
	return true
}

// apply is ACLSetUser: one rule.
func (st *state) apply(op string) errCode {
	if op == "" {
		return errNone
	}
	c := cstr(op)
	switch {
	case strings.EqualFold(c, "on"):
		st.flags = st.flags&^flagOff | flagOn
	case strings.EqualFold(c, "off"):
		st.flags = st.flags&^flagOn | flagOff
	case strings.EqualFold(c, "skip-sanitize-payload"):
		st.flags = st.flags&^flagSanitize | flagSkipSanitize
	case strings.EqualFold(c, "sanitize-payload"):
		st.flags = st.flags&^flagSkipSanitize | flagSanitize
	case strings.EqualFold(c, "nopass"):
		st.flags |= flagNopass
		st.passwords = nil
	case strings.EqualFold(c, "resetpass"):
		st.flags &^= flagNopass
		st.passwords = nil
	case op[0] == '>' || op[0] == '#':
		var h string
		if op[0] == '>' {
			h = HashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errBadMsg
			}
			h = op[1:]
		}
		if !slices.Contains(st.passwords, h) {
			st.passwords = append(st.passwords, h)
		}
		st.flags &^= flagNopass
	case op[0] == '<' || op[0] == '!':
		var h string
		if op[0] == '<' {
			h = HashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errBadMsg
			}
			h = op[1:]
		}
		i := slices.Index(st.passwords, h)
		if i < 0 {
			return errNoDev
		}
		st.passwords = slices.Delete(st.passwords, i, i+1)
	case op[0] == '(' && op[len(op)-1] == ')':
		s := newSelector(st.cmds)
		for _, a := range splitArgs(op[1 : len(op)-1]) {
			if e := s.apply(a); e != errNone {
				return e
			}
		}
		st.selectors = append(st.selectors, s)
	case strings.EqualFold(c, "clearselectors"):
		st.selectors = st.selectors[:1]
	case strings.EqualFold(c, "reset"):
		for _, r := range []string{"resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "clearselectors", "-@all"} {
			st.apply(r)
		}
	default:
		return st.selectors[0].apply(op)
	}
	return errNone
}

// mergeSelectorArgs is ACLMergeSelectorArguments: arguments from one
// starting with '(' (and not ending with ')') to one ending with ')' are
// joined with spaces into one. ok=false and the index of the opening
// argument if a selector is not closed.
func mergeSelectorArgs(args []string) (merged []string, bad int, ok bool) {
	open := -1
	var cur string
	for j, op := range args {
		if len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			cur, open = op, j
			continue
		}
		if open != -1 {
			cur += " " + cstr(op) // sdscatfmt's %s
			if len(op) > 0 && op[len(op)-1] == ')' {
				open = -1
				merged = append(merged, cur)
			}
			continue
		}
		merged = append(merged, op)
	}
	if open != -1 {
		return nil, open, false
	}
	return merged, 0, true
}
