package acl

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Error is an error reply: Error() is its text without the leading '-'
// ("ERR ...", "WRONGPASS ...", "NOAUTH ...").
type Error struct{ Text string }

func (e *Error) Error() string { return e.Text }

func errf(format string, args ...any) error {
	return &Error{"ERR " + fmt.Sprintf(format, args...)}
}

// Error replies of authentication, as Redis words them (without '-').
const (
	// ErrWrongPass answers AUTH and HELLO AUTH with a wrong username or
	// password, or a disabled user.
	ErrWrongPass = "WRONGPASS invalid username-password pair or user is disabled."
	// ErrNoAuth answers a command other than AUTH, HELLO, QUIT, RESET
	// (the no_auth ones) on a connection not authenticated yet.
	ErrNoAuth = "NOAUTH Authentication required."
	// ErrHelloNoAuth answers HELLO without AUTH on such a connection.
	ErrHelloNoAuth = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	// ErrAuthNoPassword answers AUTH <password> when the default user
	// is nopass.
	ErrAuthNoPassword = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	// ErrNoACLFile answers ACL LOAD and ACL SAVE without an ACL file.
	ErrNoACLFile = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
)

// DefaultUser is the name of the user every new connection starts as.
const DefaultUser = "default"

// User is a user of a Registry: a handle whose rules ACL SETUSER and ACL
// LOAD replace at once (connections keep the handle and see the new rules
// on their next check, as in Redis). Its methods are safe for concurrent
// use and do not lock.
type User struct {
	name    string
	st      atomic.Pointer[state]
	deleted atomic.Bool
}

func (u *User) load() *state { return u.st.Load() }

// Name is the user's name.
func (u *User) Name() string { return u.name }

// Enabled reports the "on" flag (a user that is off cannot authenticate;
// connections already authenticated as it go on).
func (u *User) Enabled() bool { return u.load().flags&flagOn != 0 }

// NoPass reports the "nopass" flag: any password authenticates.
func (u *User) NoPass() bool { return u.load().flags&flagNopass != 0 }

// Deleted reports whether ACL DELUSER or ACL LOAD removed the user: Redis
// then closes the connections authenticated as it (the caller's job).
func (u *User) Deleted() bool { return u.deleted.Load() }

// Describe is ACLDescribeUser: the user's rules as ACL LIST shows them
// after "user <name> ", and as ACL SETUSER and the ACL file accept them.
func (u *User) Describe() string { return u.load().description() }

// Info is ACL GETUSER's reply.
func (u *User) Info() UserInfo { return u.load().info() }

// AllowsAll reports whether the user's root selector allows every
// command, key and channel (the hot path needs no key extraction).
func (u *User) AllowsAll() bool {
	s := u.load().selectors[0]
	return s.allCommands && s.allKeys && s.allChannels
}

// PasswordOK is the password part of ACLCheckUserCredentials: false for a
// user that is off; true for nopass; else whether password's SHA-256 is
// one of the user's (compared in constant time).
func (u *User) PasswordOK(password string) bool {
	st := u.load()
	if st.flags&flagOff != 0 {
		return false
	}
	if st.flags&flagNopass != 0 {
		return true
	}
	h := HashPassword(password)
	ok := false
	for _, p := range st.passwords {
		if subtle.ConstantTimeCompare([]byte(h), []byte(p)) == 1 {
			ok = true
		}
	}
	return ok
}

func (u *User) publish(st *state) { u.st.Store(st) }

// Registry holds the users, Redis's Users radix tree. Starting from
// NewRegistry (the default user alone), the same ACL SETUSER, ACL
// DELUSER and ACL LOAD calls give the same users: replicas rebuild a
// registry from the lines of Lines (ACL LIST's, the ACL file's) with
// Load, or by replaying the SetUser calls. It is safe for concurrent
// use.
type Registry struct {
	cmds  *Commands
	mu    sync.RWMutex
	users map[string]*User
	def   *User
}

// defaultState is ACLCreateDefaultUser's user: on nopass ~* &* +@all.
func defaultState(cmds *Commands) *state {
	st := newState(cmds)
	for _, r := range []string{"+@all", "~*", "&*", "on", "nopass"} {
		st.apply(r)
	}
	return st
}

// NewRegistry returns a registry with Redis's initial users: the default
// user, "on nopass ~* &* +@all". cmds is the command universe (nil:
// Redis's commands alone).
func NewRegistry(cmds *Commands) *Registry {
	if cmds == nil {
		cmds = redisOnly()
	}
	r := &Registry{cmds: cmds, users: map[string]*User{}}
	r.def = &User{name: DefaultUser}
	r.def.publish(defaultState(cmds))
	r.users[DefaultUser] = r.def
	return r
}

var redisOnly = sync.OnceValue(func() *Commands { return MustCommands() })

// Commands is the registry's command universe.
func (r *Registry) Commands() *Commands { return r.cmds }

// Default is the default user (the same handle for the registry's life).
func (r *Registry) Default() *User { return r.def }

// User returns the user named name, nil if there is none.
func (r *Registry) User(name string) *User {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.users[name]
}

// Usernames is ACL USERS: the names in byte order.
func (r *Registry) Usernames() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.users))
	for n := range r.users {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lines is ACL LIST: "user <name> <description>" per user, by name. It
// is also what ACL SAVE writes (one line each) and what Load reads back.
func (r *Registry) Lines() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.users))
	for n := range r.users {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "user " + n + " " + r.users[n].Describe()
	}
	return out
}

// SaveFile is ACLSaveToFile's content: Lines, each ended by "\n".
func (r *Registry) SaveFile() []byte {
	var b strings.Builder
	for _, l := range r.Lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// replySafe is addReplyErrorSdsSafe: CR and LF become spaces.
func replySafe(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// SetUser is ACL SETUSER name rules...: it creates the user or changes
// it, all rules or none. The rules are ACL SETUSER's arguments; a
// selector may span several ("(~a" "+get)"). The error is Redis's reply.
func (r *Registry) SetUser(name string, rules ...string) error {
	_, err := r.Apply(name, rules...)
	return err
}

// Change tells what a successful Apply did beyond the rules.
type Change struct {
	// Created: the user did not exist.
	Created bool
	// ChannelsNarrowed is Redis's test in ACLKillPubsubClientsIfNeeded:
	// the user had channel permissions that the new rules do not keep
	// (no selector has allchannels and the new patterns are not a
	// superset of the old). Redis then closes each Pub/Sub connection of
	// the user that has a pattern subscription p with
	// !CheckChannel(p, true) or a channel or shard channel subscription
	// c with !CheckChannel(c, false); that is the caller's.
	ChannelsNarrowed bool
}

// Apply is SetUser, telling what changed.
func (r *Registry) Apply(name string, rules ...string) (Change, error) {
	if hasSpaces(name) {
		return Change{}, errf("Usernames can't contain spaces or null characters")
	}
	merged, bad, ok := mergeSelectorArgs(rules)
	if !ok {
		return Change{}, &Error{replySafe("ERR Unmatched parenthesis in acl selector starting at '" + cstr(rules[bad]) + "'.")}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.users[name]
	var st *state
	if u != nil {
		st = u.load().clone()
	} else {
		st = newState(r.cmds)
	}
	for _, op := range merged {
		if e := st.apply(op); e != errNone {
			return Change{}, &Error{replySafe("ERR Error in ACL SETUSER modifier '" + cstr(op) + "': " + e.text())}
		}
	}
	var ch Change
	if u == nil {
		u = &User{name: name}
		r.users[name] = u
		ch.Created = true
	} else {
		ch.ChannelsNarrowed = channelsNarrowed(u.load(), st)
	}
	u.publish(st)
	return ch, nil
}

// channelsNarrowed is the test of ACLKillPubsubClientsIfNeeded.
func channelsNarrowed(old, cur *state) bool {
	var upcoming []string
	for _, s := range cur.selectors {
		if s.allChannels {
			return false
		}
		upcoming = append(upcoming, s.channels...)
	}
	for _, s := range old.selectors {
		if s.allChannels {
			return true
		}
		for _, c := range s.channels {
			if !slices.Contains(upcoming, c) {
				return true
			}
		}
	}
	return false
}

// DelUser is ACL DELUSER: the number of users removed; none if one of the
// names is "default" (an error).
func (r *Registry) DelUser(names ...string) (int, error) {
	for _, n := range names {
		if n == DefaultUser {
			return 0, errf("The 'default' user cannot be removed")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range names {
		if u := r.users[name]; u != nil {
			u.deleted.Store(true)
			delete(r.users, name)
			n++
		}
	}
	return n, nil
}

// Authenticate is ACLCheckUserCredentials for AUTH and HELLO AUTH: the
// user if name exists, is on and password is one of its passwords (or
// it is nopass); else an Error with ErrWrongPass (and ACL LOG wants an
// entry: reason DeniedAuth, object "AUTH" or "HELLO", the username
// given).
func (r *Registry) Authenticate(name, password string) (*User, error) {
	u := r.User(name)
	if u == nil || !u.PasswordOK(password) {
		return nil, &Error{ErrWrongPass}
	}
	return u, nil
}

// DryRun is ACL DRYRUN: args are its arguments (the username, the
// command, the command's arguments). It returns "" if the user may run
// the command (Redis replies +OK), else the refusal Redis replies as a
// bulk string; err is Redis's error reply (unknown user or command, wrong
// number of arguments).
func (r *Registry) DryRun(args [][]byte, keys KeySource) (denied string, err error) {
	if len(args) < 2 {
		return "", errf("wrong number of arguments for 'acl|dryrun' command")
	}
	u := r.User(string(args[0]))
	if u == nil {
		return "", errf("User '%s' not found", cstr(string(args[0])))
	}
	argv := args[1:]
	cmd := r.cmds.Lookup(argv)
	if cmd == nil {
		return "", errf("Command '%s' not found", cstr(string(argv[0])))
	}
	if !cmd.ArityOK(argv) {
		return "", errf("wrong number of arguments for '%s' command", cmd.Name)
	}
	d, idx := u.Check(cmd, argv, keys)
	switch d {
	case Allowed:
		return "", nil
	case DeniedCommand:
		return "This user has no permissions to run the '" + cmd.Name + "' command", nil
	case DeniedKey:
		return "This user has no permissions to access the '" + cstr(string(argv[idx])) + "' key", nil
	default:
		return "This user has no permissions to access the '" + cstr(string(argv[idx])) + "' channel", nil
	}
}

// GenPass is ACL GENPASS [bits]: (bits+3)/4 random lower-case hex
// characters, bits from 1 to 4096 (256 by default in Redis).
func GenPass(bits int64) (string, error) {
	if bits <= 0 || bits > 4096 {
		return "", errf("ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(buf)[:chars], nil
}

// Cat is ACL CAT [category]: without a category Redis's category names,
// with one the commands and subcommands in it (see InCategory for the
// order).
func (r *Registry) Cat(category ...string) ([]string, error) {
	if len(category) == 0 {
		return CategoryNames(), nil
	}
	cat, ok := CategoryByName(category[0])
	if !ok {
		name := cstr(category[0])
		if len(name) > 128 {
			name = name[:128]
		}
		return nil, errf("Unknown category '%s'", name)
	}
	return r.cmds.InCategory(cat), nil
}

// Load is ACL LOAD (ACLLoadFromFile) of content, an ACL file; filename
// is the name its errors give (Redis's aclfile setting). Either every
// line is valid and the registry's users become the file's (the default
// user, if the file has none, Redis's initial one; the default handle is
// kept, the other users' handles are Deleted), or nothing changes and the
// error is Redis's reply, every problem with its line number followed by
// "WARNING: ACL errors detected, no change to the previously active ACL
// rules was performed".
func (r *Registry) Load(filename string, content []byte) error {
	states, order, errs := parseFile(r.cmds, filename, content)
	if errs != "" {
		return &Error{"ERR " + errs + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, u := range r.users {
		if name != DefaultUser {
			u.deleted.Store(true)
		}
	}
	r.users = map[string]*User{DefaultUser: r.def}
	for _, name := range order {
		if name == DefaultUser {
			continue
		}
		u := &User{name: name}
		u.publish(states[name])
		r.users[name] = u
	}
	if st := states[DefaultUser]; st != nil {
		r.def.publish(st)
	} else {
		r.def.publish(defaultState(r.cmds))
	}
	return nil
}

// SyncLines makes the registry's users those of lines (as Lines returns
// them), all or nothing like Load, but keeps the handles of the users
// that stay: their connections see the new rules instead of being
// Deleted. It suits a replica installing a snapshot of the users; Load
// is ACL LOAD.
func (r *Registry) SyncLines(lines []string) error {
	states, order, errs := parseFile(r.cmds, "lines", []byte(strings.Join(lines, "\n")))
	if errs != "" {
		return &Error{"ERR " + errs + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	users := map[string]*User{DefaultUser: r.def}
	for _, name := range order {
		if name == DefaultUser {
			continue
		}
		u := r.users[name]
		if u == nil {
			u = &User{name: name}
		}
		u.publish(states[name])
		users[name] = u
	}
	for name, u := range r.users {
		if users[name] == nil {
			u.deleted.Store(true)
		}
	}
	r.users = users
	if st := states[DefaultUser]; st != nil {
		r.def.publish(st)
	} else {
		r.def.publish(defaultState(r.cmds))
	}
	return nil
}

// LoadLines is Load of the lines (as Lines returns them) joined by
// newlines: the way to rebuild a registry's users from a replicated list.
func (r *Registry) LoadLines(lines []string) error {
	return r.Load("lines", []byte(strings.Join(lines, "\n")))
}

// trimSet is sdstrim: cut the bytes in set from both ends.
func trimSet(s, set string) string {
	return strings.Trim(s, set)
}

// readLikeFgets is how ACLLoadFromFile reads the file: fgets into a
// 1024-byte buffer, each piece (a line, or 1023 bytes of a longer one)
// appended up to its first NUL.
func readLikeFgets(content []byte) string {
	var b strings.Builder
	for len(content) > 0 {
		n := len(content)
		if i := bytes.IndexByte(content, '\n'); i >= 0 && i+1 < n {
			n = i + 1
		}
		n = min(n, 1023)
		piece := content[:n]
		if i := bytes.IndexByte(piece, 0); i >= 0 {
			piece = piece[:i]
		}
		b.Write(piece)
		content = content[n:]
	}
	return b.String()
}

// parseFile checks an ACL file as ACLLoadFromFile does and returns the
// users it defines, their names in file order, and the errors text
// ("" if none).
func parseFile(cmds *Commands, filename string, content []byte) (map[string]*state, []string, string) {
	text := readLikeFgets(content)
	var errs strings.Builder
	states := map[string]*state{}
	var order []string
	for i, line := range strings.Split(text, "\n") {
		linenum := i + 1
		line = trimSet(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", filename, linenum)
			continue
		}
		name := argv[1]
		if hasSpaces(name) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", filename, linenum, cstr(name))
			continue
		}
		if states[name] != nil {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", cstr(name), linenum)
			continue
		}
		st := newState(cmds)
		states[name] = st
		order = append(order, name)
		merged, _, ok := mergeSelectorArgs(argv[2:])
		if !ok {
			// Redis goes on to read the merged arguments it just freed
			// (and crashes when there were any); nothing more is applied here.
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", filename, linenum)
			continue
		}
		syntax := false
		for _, op := range merged {
			op = trimSet(op, "\t\r\n")
			e := st.apply(op)
			switch {
			case e == errNone:
			case e == errNoEnt:
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", filename, linenum, cstr(op), e.text())
			case !syntax:
				fmt.Fprintf(&errs, "%s:%d: %s. ", filename, linenum, e.text())
				syntax = true
			}
		}
	}
	return states, order, errs.String()
}
