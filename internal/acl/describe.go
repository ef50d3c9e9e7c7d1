package acl

import (
	"strings"
)

// describeCommands is ACLDescribeSelectorCommandRules: the command rules
// that rebuild s's command bitmap, starting with +@all or -@all, then the
// categories that fit best (Redis's greedy loop, in its category order),
// then single commands. Redis emits the single commands in its command
// table's hash order; here they are in name order, each container before
// its subcommands and its allowed first arguments, so that the set of
// rules is Redis's.
func (s *selector) describeCommands() string {
	var b strings.Builder
	additive := !s.future
	fake := newSelector(s.cmds)
	if additive {
		b.WriteString("-@all ")
	} else {
		b.WriteString("+@all ")
		fake.setAll(true)
	}
	temp := &selector{allowed: append([]uint64(nil), s.allowed...), cmds: s.cmds}
	var applied [NumCategories]bool
	for {
		best := -1
		var mindiff, maxsame = int(^uint(0) >> 1), 0
		for j := range categoryNames {
			if applied[j] {
				continue
			}
			on, off := temp.countCategory(1 << j)
			diff, same := on, off
			if additive {
				diff, same = off, on
			}
			if same > diff && (diff < mindiff || diff == mindiff && same > maxsame) {
				best, mindiff, maxsame = j, diff, same
			}
		}
		if best == -1 {
			break
		}
		cat := Category(1) << best
		if additive {
			b.WriteString("+@")
		} else {
			b.WriteString("-@")
		}
		b.WriteString(categoryNames[best])
		b.WriteByte(' ')
		fake.setCategory(cat, additive)
		temp.setCategory(cat, !additive)
		applied[best] = true
	}
	for _, t := range s.cmds.top {
		s.describeSingle(fake, t, &b)
		for _, sub := range t.Subcommands {
			s.describeSingle(fake, sub, &b)
		}
		if !s.bit(t.ID) {
			for _, a := range s.firstArgs[t.ID] {
				b.WriteByte('+')
				b.WriteString(t.Name)
				b.WriteByte('|')
				b.WriteString(a)
				b.WriteByte(' ')
			}
		}
	}
	out := b.String()
	return out[:len(out)-1]
}

func (s *selector) describeSingle(fake *selector, cmd *Command, b *strings.Builder) {
	user := s.bit(cmd.ID)
	if user == fake.bit(cmd.ID) {
		return
	}
	if user {
		b.WriteByte('+')
	} else {
		b.WriteByte('-')
	}
	b.WriteString(cmd.Name)
	b.WriteByte(' ')
	fake.changePerm(cmd, user)
}

// countCategory is ACLCountCategoryBitsForSelector.
func (s *selector) countCategory(cat Category) (on, off int) {
	for _, cmd := range s.cmds.members(cat) {
		if s.bit(cmd.ID) {
			on++
		} else {
			off++
		}
	}
	return
}

func (k keyPattern) String() string {
	switch k.perm {
	case permRead:
		return "%R~" + k.pattern
	case permWrite:
		return "%W~" + k.pattern
	}
	return "~" + k.pattern
}

// keysString is GETUSER's "keys" field.
func (s *selector) keysString() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " ")
}

// channelsString is GETUSER's "channels" field.
func (s *selector) channelsString() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, c := range s.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// describe is ACLDescribeSelector.
func (s *selector) describe() string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range s.keys {
			b.WriteString(k.String())
			b.WriteByte(' ')
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range s.channels {
			b.WriteByte('&')
			b.WriteString(c)
			b.WriteByte(' ')
		}
	}
	b.WriteString(s.describeCommands())
	return b.String()
}

// describe is ACLDescribeUser.
func (st *state) describe() string {
	var b strings.Builder
	for _, f := range userFlagNames {
		if st.flags&f.flag != 0 {
			b.WriteString(f.name)
			b.WriteByte(' ')
		}
	}
	for _, p := range st.passwords {
		b.WriteByte('#')
		b.WriteString(p)
		b.WriteByte(' ')
	}
	for i, s := range st.selectors {
		if i == 0 {
			b.WriteString(s.describe())
		} else {
			b.WriteString(" (")
			b.WriteString(s.describe())
			b.WriteByte(')')
		}
	}
	return b.String()
}

// SelectorInfo is one selector as ACL GETUSER shows it.
type SelectorInfo struct {
	Commands string // the command rules, as in the description
	Keys     string // "~*", or the key patterns ("~a %R~b %W~c"), space separated
	Channels string // "&*", or the channel patterns ("&a &b")
}

// UserInfo is ACL GETUSER's reply: the fields in Redis's order, flags,
// passwords, commands, keys, channels (the root selector's), selectors.
type UserInfo struct {
	Flags     []string
	Passwords []string // SHA-256 hex digests
	SelectorInfo
	Selectors []SelectorInfo
}

func (st *state) info() UserInfo {
	var ui UserInfo
	ui.Flags = []string{}
	for _, f := range userFlagNames {
		if st.flags&f.flag != 0 {
			ui.Flags = append(ui.Flags, f.name)
		}
	}
	ui.Passwords = append([]string{}, st.passwords...)
	sel := func(s *selector) SelectorInfo {
		return SelectorInfo{Commands: s.describeCommands(), Keys: s.keysString(), Channels: s.channelsString()}
	}
	ui.SelectorInfo = sel(st.selectors[0])
	ui.Selectors = []SelectorInfo{}
	for _, s := range st.selectors[1:] {
		ui.Selectors = append(ui.Selectors, sel(s))
	}
	return ui
}
