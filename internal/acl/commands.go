package acl

import (
	"fmt"
	"sort"
	"strings"
)

// Category is a set of ACL command categories (the Cat* bits, in Redis's
// order; see commands_redis.go).
type Category uint32

// NumCategories is the number of Redis's ACL categories.
const NumCategories = len(categoryNames)

// CategoryNames returns Redis's category names in Redis's order (what
// ACL CAT without an argument replies).
func CategoryNames() []string { return append([]string(nil), categoryNames[:]...) }

// CategoryByName returns the category named name (case-insensitive, as
// ACLGetCommandCategoryFlagByName) and whether it exists.
func CategoryByName(name string) (Category, bool) {
	for i, n := range categoryNames {
		if strings.EqualFold(n, name) {
			return 1 << i, true
		}
	}
	return 0, false
}

// Names returns the names of the categories in c, in Redis's order.
func (c Category) Names() []string {
	var out []string
	for i, n := range categoryNames {
		if c&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// CommandSpec describes one command or subcommand for the ACL universe:
// what Redis's command table tells ACLs about it.
type CommandSpec struct {
	// Name is the lower-case name; a subcommand is "container|sub" and
	// needs its container in the same universe.
	Name string
	// Arity is Redis's arity: n > 0 exactly n arguments (the command
	// name included), n < 0 at least -n.
	Arity int
	// Categories are the ACL categories, those Redis derives from the
	// command flags (write, read, admin+dangerous, pubsub, fast/slow,
	// blocking) included.
	Categories Category
	// NoAuth is Redis's CMD_NO_AUTH (AUTH, HELLO, QUIT, RESET): always
	// allowed, whatever the user's command rules.
	NoAuth bool
}

// Channel argument kinds (Redis's commands_with_channels, db.c): which
// arguments of a command are Pub/Sub channels ACLs check.
type channelKind uint8

const (
	noChannels       channelKind = iota
	publishChannel               // argument 1 is a channel published to
	subscribeChannel             // arguments 1.. are channels subscribed to
	subscribePattern             // arguments 1.. are patterns subscribed to
)

var redisChannelCommands = map[string]channelKind{
	"publish":    publishChannel,
	"spublish":   publishChannel,
	"subscribe":  subscribeChannel,
	"ssubscribe": subscribeChannel,
	"psubscribe": subscribePattern,
}

// Command is one command of a Commands universe. Its ID indexes the
// users' command bitmaps.
type Command struct {
	// Name is the full lower-case name ("get", "config|get").
	Name       string
	ID         int
	Arity      int
	Categories Category
	NoAuth     bool
	// Parent is the container of a subcommand, nil for a command.
	Parent *Command
	// Subcommands are a container's subcommands, by name.
	Subcommands []*Command

	subs     map[string]*Command // by the lower-case part after '|'
	channels channelKind
}

// Commands is the universe of commands ACL rules refer to: Redis's
// (RedisCommands) plus the caller's own. It is immutable and safe for
// concurrent use.
type Commands struct {
	top   []*Command          // top-level commands by name
	byTop map[string]*Command // top-level by lower-case name
	all   []*Command          // by ID
	words int                 // uint64 words of a command bitmap
	// inCat are the commands of each category in walk order.
	inCat [NumCategories][]*Command
}

// NewCommands builds the universe of Redis's commands and the extra
// ones (kvorum's own, such as LEASE or LOCK, with their categories). An
// extra command must not repeat a name; an extra subcommand's container
// must exist (Redis's or an earlier extra one).
func NewCommands(extra ...CommandSpec) (*Commands, error) {
	c := &Commands{byTop: map[string]*Command{}}
	specs := append(append([]CommandSpec(nil), RedisCommands...), extra...)
	for _, s := range specs {
		name := strings.ToLower(s.Name)
		if name == "" || strings.ContainsAny(name, " \t\r\n\x00") {
			return nil, fmt.Errorf("acl: bad command name %q", s.Name)
		}
		cmd := &Command{Name: name, ID: len(c.all), Arity: s.Arity, Categories: s.Categories, NoAuth: s.NoAuth}
		if parent, sub, ok := strings.Cut(name, "|"); ok {
			p := c.byTop[parent]
			if p == nil || sub == "" || strings.Contains(sub, "|") {
				return nil, fmt.Errorf("acl: subcommand %q without its container", s.Name)
			}
			if p.subs[sub] != nil {
				return nil, fmt.Errorf("acl: duplicate command %q", s.Name)
			}
			if p.subs == nil {
				p.subs = map[string]*Command{}
			}
			cmd.Parent = p
			p.subs[sub] = cmd
			p.Subcommands = append(p.Subcommands, cmd)
		} else {
			if c.byTop[name] != nil {
				return nil, fmt.Errorf("acl: duplicate command %q", s.Name)
			}
			c.byTop[name] = cmd
			c.top = append(c.top, cmd)
			cmd.channels = redisChannelCommands[name]
		}
		c.all = append(c.all, cmd)
	}
	sort.Slice(c.top, func(i, j int) bool { return c.top[i].Name < c.top[j].Name })
	for _, t := range c.top {
		sort.Slice(t.Subcommands, func(i, j int) bool { return t.Subcommands[i].Name < t.Subcommands[j].Name })
	}
	c.words = (len(c.all) + 63) / 64
	c.walk(func(cmd *Command) {
		for i := range c.inCat {
			if cmd.Categories&(1<<i) != 0 {
				c.inCat[i] = append(c.inCat[i], cmd)
			}
		}
	})
	return c, nil
}

// MustCommands is NewCommands that panics on an error (for static tables).
func MustCommands(extra ...CommandSpec) *Commands {
	c, err := NewCommands(extra...)
	if err != nil {
		panic(err)
	}
	return c
}

// Len is the number of commands and subcommands.
func (c *Commands) Len() int { return len(c.all) }

// ByID returns the command with id.
func (c *Commands) ByID(id int) *Command { return c.all[id] }

// lowerKey returns s lower-cased in buf when it has upper-case letters
// (no allocation for names that fit buf).
func lowerKey(s []byte, buf *[64]byte) []byte {
	for i, b := range s {
		if 'A' <= b && b <= 'Z' {
			if len(s) > len(buf) {
				return []byte(strings.ToLower(string(s)))
			}
			n := copy(buf[:], s)
			for j := i; j < n; j++ {
				if 'A' <= buf[j] && buf[j] <= 'Z' {
					buf[j] += 'a' - 'A'
				}
			}
			return buf[:n]
		}
	}
	return s
}

func (c *Commands) top1(name []byte) *Command {
	var buf [64]byte
	return c.byTop[string(lowerKey(name, &buf))]
}

func (cmd *Command) sub(name []byte) *Command {
	var buf [64]byte
	return cmd.subs[string(lowerKey(name, &buf))]
}

// Lookup finds the command args (the command name and its arguments)
// runs, as Redis's lookupCommand: a container with arguments resolves to
// its subcommand (nil if there is no such subcommand), a container
// alone to itself. nil if the command does not exist.
func (c *Commands) Lookup(args [][]byte) *Command {
	if len(args) == 0 {
		return nil
	}
	base := c.top1(args[0])
	if base == nil || len(args) == 1 || base.subs == nil {
		return base
	}
	return base.sub(args[1])
}

// LookupName finds a command by its full name, "cmd" or "container|sub",
// case-insensitively, as ACL rules name them (Redis's
// lookupCommandBySds: one level of subcommands; "cmd|x" is nil when cmd
// has no subcommands).
func (c *Commands) LookupName(name string) *Command {
	parts := strings.Split(name, "|")
	if len(parts) > 2 {
		return nil
	}
	base := c.top1([]byte(parts[0]))
	if len(parts) == 1 || base == nil {
		return base
	}
	if base.subs == nil {
		return nil
	}
	return base.sub([]byte(parts[1]))
}

// InCategory returns the full names of the commands and subcommands in
// cat (what ACL CAT <category> replies; Redis lists them in its command
// table's hash order, this in name order, containers before their
// subcommands).
func (c *Commands) InCategory(cat Category) []string {
	var out []string
	c.walk(func(cmd *Command) {
		if cmd.Categories&cat != 0 {
			out = append(out, cmd.Name)
		}
	})
	return out
}

// members are the commands of cat, a single category, in walk order.
func (c *Commands) members(cat Category) []*Command {
	for i := range c.inCat {
		if cat == 1<<i {
			return c.inCat[i]
		}
	}
	return nil
}

// walk calls f for every command in name order, each container before
// its subcommands.
func (c *Commands) walk(f func(*Command)) {
	for _, t := range c.top {
		f(t)
		for _, s := range t.Subcommands {
			f(s)
		}
	}
}

// ArityOK reports whether args (the command name, the subcommand name
// and the arguments) have the number of arguments cmd's arity asks for.
func (cmd *Command) ArityOK(args [][]byte) bool {
	n := len(args)
	return !(cmd.Arity > 0 && cmd.Arity != n || n < -cmd.Arity)
}
