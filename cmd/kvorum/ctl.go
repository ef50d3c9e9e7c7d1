package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/server"
)

var ctlHelp = helpText{
	usage: `
kvorum ctl [--addr HOST:PORT] [--json] status
kvorum ctl [--addr HOST:PORT] health
kvorum ctl [--addr HOST:PORT] [--json] member list
kvorum ctl [--addr HOST:PORT] [--json] member add ID PEERADDR
kvorum ctl [--addr HOST:PORT] [--json] member remove ID
kvorum ctl [--addr HOST:PORT] [--json] transfer-leader ID
kvorum ctl [--addr HOST:PORT] [--json] range list
kvorum ctl [--addr HOST:PORT] [--json] range split RANGE SLOT
kvorum ctl [--addr HOST:PORT] [--json] range transfer-leader RANGE NODE
kvorum ctl [--addr HOST:PORT] backup --out FILE`,
	description: `
Talks to one node's admin HTTP API (see 'kvorum start --admin-addr').

  status               the node's role, term, leader, Raft indexes, members,
                       and how many ranges it holds and leads
  health               exit 0 if the node is ready (its /readyz: it has a
                       leader and can serve linearizable reads), 1 if not or
                       unreachable, with a one-line message; for health
                       checks (--timeout defaults to 5s here)
  member list          the cluster's members (voters and learners)
  member add ID ADDR   add node ID whose peer address is ADDR: it joins as a
                       learner and is promoted to voter once caught up (waits
                       for that, up to a minute). 'kvorum start --join' does
                       this by itself; use member add to re-add or to drive
                       it by hand
  member remove ID     remove node ID from the cluster
  transfer-leader ID   move leadership of every range to node ID and wait
                       until it holds
  range list           the ranges (Raft groups) this node holds a replica
                       of: its hash slots, generation, its replica's role,
                       the leader, the
                       replicas, the applied index, the approximate size
                       of the range's data on this node and its load: the
                       client reads and writes per second this node ran
                       for the range over the last 10 s (served here or
                       forwarded to the leader; each command of a pipeline
                       counts). --json adds the totals since the node
                       started (reads_total, writes_total)
  range split RANGE SLOT
                       split range RANGE in two: it keeps the hash slots
                       below SLOT, a new range (same replicas, a new id)
                       takes SLOT and above. SLOT must be strictly inside
                       the range's slots (see range list). Prints both new
                       ranges. Keys stay where they are; clients are not
                       interrupted (writes racing the split are routed
                       again). Refused while a node's disk is nearly full
                       (--min-free-disk)
  range transfer-leader RANGE NODE
                       move the leadership of range RANGE only to node
                       NODE, a voter of that range, and wait until it
                       holds; the other ranges keep their leaders
                       (transfer-leader ID moves every range's)
  backup --out FILE    stream a consistent backup of the cluster's data from
                       this node into FILE: every write acknowledged before
                       the command started is in it, at one Raft index
                       (printed at the end with the file's checksum); the
                       file is verified before it gets its name (FILE.part
                       until then). 'kvorum restore' seeds a new cluster
                       with it

Any member will do: membership changes and leadership transfers are
forwarded to the leader. Flags may also follow the subcommand.

A node started with --admin-token-file wants its token: --token-file FILE,
--token TOKEN or the environment variable KVORUM_ADMIN_TOKEN. A node whose
admin port speaks HTTPS (--admin-tls-cert-file) is reached with --cacert
CAFILE (then HOST:PORT means https://) or an https:// URL; a client
certificate for --admin-tls-ca-cert-file is given with --cert and --key.
Exit status: 0 on success, 1 if the operation failed or the node is
unreachable, 2 on a bad command line.`,
	groups: []flagGroup{{"Flags", []string{"addr", "json", "timeout", "out"}}, ctlSecurityGroup},
}

type ctlFlags struct {
	fs      *flag.FlagSet
	addr    string
	json    bool
	timeout time.Duration
	out     string
	sec     ctlSecurity
}

func newCtlFlags() *ctlFlags {
	f := &ctlFlags{fs: flag.NewFlagSet("ctl", flag.ContinueOnError)}
	f.fs.StringVar(&f.addr, "addr", server.DefaultAdminAddr, "`HOST:PORT` (or http:// or https:// URL) of a node's admin server: its --admin-addr")
	f.fs.BoolVar(&f.json, "json", false, "print the admin API's JSON answer instead of text")
	f.fs.DurationVar(&f.timeout, "timeout", 75*time.Second, "give up waiting for an answer after this `DURATION` (backup: for the\nbackup to start; the stream then takes as long as it needs)")
	f.fs.StringVar(&f.out, "out", "", "backup: the `FILE` to write (refused if it exists)")
	addCtlSecurityFlags(f.fs, &f.sec)
	return f
}

// ctlCommand is a parsed ctl invocation.
type ctlCommand struct {
	op       string // status, health, member-list, member-add, member-remove, transfer-leader, range-list, range-split, range-transfer-leader
	id       uint64 // a node id, or a range id (range-split, range-transfer-leader)
	peerAddr string
	slot     uint16 // range-split
	node     uint64 // range-transfer-leader
}

func parseCtl(args []string, stdout io.Writer) (*ctlFlags, ctlCommand, error) {
	f := newCtlFlags()
	// Parse flags wherever they appear: before or after the subcommand.
	var pos []string
	for {
		if err := parseFlags("ctl", f.fs, ctlHelp, args, stdout); err != nil {
			return nil, ctlCommand{}, err
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	bad := func(format string, a ...any) error { return usageErrorf("ctl", format, a...) }
	if f.timeout <= 0 {
		return nil, ctlCommand{}, bad("--timeout must be positive")
	}
	if _, err := adminURL(f.addr, f.sec.https()); err != nil {
		return nil, ctlCommand{}, bad("--addr: %v", err)
	}
	if err := f.sec.check(setFlags(f.fs)); err != nil {
		return nil, ctlCommand{}, bad("%v", err)
	}
	if len(pos) == 0 {
		return nil, ctlCommand{}, bad("missing subcommand: status, health, member list, member add, member remove, transfer-leader, range list or backup")
	}
	nargs := func(n int, usage string) error {
		if len(pos) != n {
			return bad("usage: kvorum ctl %s", usage)
		}
		return nil
	}
	parseID := func(s string) (uint64, error) {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil || id == 0 {
			return 0, bad("node id %q is not a positive integer", s)
		}
		return id, nil
	}
	var c ctlCommand
	var err error
	switch pos[0] {
	case "status":
		c.op = "status"
		err = nargs(1, "status")
	case "health":
		c.op = "health"
		err = nargs(1, "health")
	case "member", "members":
		if len(pos) < 2 {
			return nil, c, bad("usage: kvorum ctl member list | member add ID PEERADDR | member remove ID")
		}
		switch pos[1] {
		case "list", "ls":
			c.op = "member-list"
			err = nargs(2, "member list")
		case "add":
			c.op = "member-add"
			if err = nargs(4, "member add ID PEERADDR"); err == nil {
				if c.id, err = parseID(pos[2]); err == nil {
					c.peerAddr = pos[3]
					if verr := admin.ValidatePeerAddr(c.peerAddr); verr != nil {
						err = bad("peer address: %v", verr)
					}
				}
			}
		case "remove", "rm":
			c.op = "member-remove"
			if err = nargs(3, "member remove ID"); err == nil {
				c.id, err = parseID(pos[2])
			}
		default:
			return nil, c, bad("unknown member subcommand %q (want list, add or remove)", pos[1])
		}
	case "range", "ranges":
		if len(pos) < 2 {
			return nil, c, bad("usage: kvorum ctl range list | range split RANGE SLOT | range transfer-leader RANGE NODE")
		}
		switch pos[1] {
		case "list", "ls":
			c.op = "range-list"
			err = nargs(2, "range list")
		case "split":
			c.op = "range-split"
			if err = nargs(4, "range split RANGE SLOT"); err == nil {
				id, perr := strconv.ParseUint(pos[2], 10, 64)
				sl, serr := strconv.ParseUint(pos[3], 10, 16)
				switch {
				case perr != nil || id == 0:
					err = bad("range id %q is not a positive integer (see kvorum ctl range list)", pos[2])
				case serr != nil || sl == 0 || sl > 16383:
					err = bad("slot %q is not a hash slot from 1 to 16383 (the first slot of the new range)", pos[3])
				default:
					c.id, c.slot = id, uint16(sl)
				}
			}
		case "transfer-leader":
			c.op = "range-transfer-leader"
			if err = nargs(4, "range transfer-leader RANGE NODE"); err == nil {
				id, perr := strconv.ParseUint(pos[2], 10, 64)
				if perr != nil || id == 0 {
					err = bad("range id %q is not a positive integer (see kvorum ctl range list)", pos[2])
				} else if c.node, err = parseID(pos[3]); err == nil {
					c.id = id
				}
			}
		default:
			return nil, c, bad("unknown range subcommand %q (want list, split or transfer-leader)", pos[1])
		}
	case "transfer-leader":
		c.op = "transfer-leader"
		if err = nargs(2, "transfer-leader ID"); err == nil {
			c.id, err = parseID(pos[1])
		}
	case "backup":
		c.op = "backup"
		if err = nargs(1, "backup --out FILE"); err == nil && f.out == "" {
			err = bad("backup needs --out FILE")
		}
	default:
		return nil, c, bad("unknown subcommand %q (want status, health, member, range, transfer-leader or backup)", pos[0])
	}
	if f.out != "" && c.op != "backup" {
		return nil, c, bad("--out is for backup only")
	}
	if err != nil {
		return nil, c, err
	}
	return f, c, nil
}

// adminURL turns --addr (HOST:PORT, or an http:// URL) into a base URL;
// HOST:PORT is https:// with https set (ctl --cacert).
func adminURL(addr string, https bool) (string, error) {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%q is not a valid URL", addr)
		}
		return strings.TrimRight(addr, "/"), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "", fmt.Errorf("%q has an invalid port %q", addr, port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port), nil
}

// ctlClient calls one node's admin API.
type ctlClient struct {
	addr  string // as the user gave it, for messages
	base  string
	http  *http.Client
	token string // sent as "Authorization: Bearer" when set
}

// call performs a request and decodes a 2xx JSON answer into out (if not
// nil). It returns the raw body for --json.
func (c *ctlClient) call(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			if ue.Timeout() {
				return nil, fmt.Errorf("no answer from kvorum admin at %s within %v (the operation may still complete)", c.addr, c.http.Timeout)
			}
			err = ue.Err
		}
		var unknownCA x509.UnknownAuthorityError
		if errors.As(err, &unknownCA) {
			return nil, fmt.Errorf("kvorum admin at %s: its certificate is not signed by a CA this client trusts (give its CA with --cacert): %v", c.addr, err)
		}
		return nil, fmt.Errorf("cannot reach kvorum admin at %s: %v", c.addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading answer from kvorum admin at %s: %v", c.addr, err)
	}
	if resp.StatusCode/100 != 2 {
		var e admin.ErrorResponse
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(raw), "HTTP request to an HTTPS server") {
			return raw, fmt.Errorf("kvorum admin at %s speaks HTTPS: give --cacert CAFILE (the CA of its --admin-tls-cert-file) or an https:// URL", c.addr)
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			return raw, fmt.Errorf("unexpected answer from %s (is it a kvorum admin address?): HTTP %d: %s",
				c.addr, resp.StatusCode, truncate(strings.TrimSpace(string(raw)), 200))
		}
		msg := e.Error
		if resp.StatusCode == http.StatusUnauthorized && c.token != "" {
			msg = "the admin server refused the token (is it the one in the node's --admin-token-file?)"
		}
		if e.Leader != 0 {
			msg += fmt.Sprintf(" (node %d is the leader: run this against its admin address)", e.Leader)
		} else if resp.StatusCode == http.StatusMisdirectedRequest {
			msg += " (no leader known; retry shortly)"
		}
		return raw, fmt.Errorf("%s (HTTP %d)", msg, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("unexpected answer from %s (is it a kvorum admin address?): %v", c.addr, err)
		}
	}
	return raw, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, cmd, err := parseCtl(args, stdout)
	if err != nil {
		return err
	}
	base, _ := adminURL(f.addr, f.sec.https())
	timeout := f.timeout
	if cmd.op == "health" && !setFlags(f.fs)["timeout"] {
		timeout = healthTimeout
	}
	hc, token, err := f.sec.client(timeout)
	if err != nil {
		return err
	}
	c := &ctlClient{addr: f.addr, base: base, http: hc, token: token}
	if cmd.op == "backup" {
		return c.backup(ctx, f.out, timeout, stdout, stderr)
	}
	return c.run(ctx, cmd, f.json, stdout, stderr)
}

func (c *ctlClient) run(ctx context.Context, cmd ctlCommand, asJSON bool, stdout, stderr io.Writer) error {
	var (
		raw []byte
		err error
	)
	switch cmd.op {
	case "status":
		var st admin.Status
		if raw, err = c.call(ctx, http.MethodGet, "/v1/status", nil, &st); err == nil && !asJSON {
			writeStatus(stdout, st)
		}
	case "health":
		return c.health(ctx, stdout)
	case "member-list":
		var mr admin.MembersResponse
		if raw, err = c.call(ctx, http.MethodGet, "/v1/members", nil, &mr); err == nil && !asJSON {
			writeMembers(stdout, mr)
		}
	case "range-list":
		var rr admin.RangesResponse
		if raw, err = c.call(ctx, http.MethodGet, "/v1/ranges", nil, &rr); err == nil && !asJSON {
			writeRanges(stdout, rr)
		}
	case "range-split":
		var sr admin.SplitRangeResponse
		slot := int(cmd.slot)
		req := admin.SplitRangeRequest{Slot: &slot}
		if raw, err = c.call(ctx, http.MethodPost, fmt.Sprintf("/v1/ranges/%d/split", cmd.id), req, &sr); err == nil && !asJSON {
			fmt.Fprintf(stdout, "split range %d at slot %d\n", cmd.id, cmd.slot)
			for _, d := range []admin.RangeDescriptor{sr.Left, sr.Right} {
				fmt.Fprintf(stdout, "range %d: slots %d-%d, generation %d\n", d.RangeID, d.StartSlot, d.EndSlot-1, d.Generation)
			}
		}
	case "range-transfer-leader":
		var tr admin.TransferRangeLeaderResponse
		req := admin.TransferRangeLeaderRequest{Node: cmd.node}
		if raw, err = c.call(ctx, http.MethodPost, fmt.Sprintf("/v1/ranges/%d/transfer-leader", cmd.id), req, &tr); err == nil && !asJSON {
			fmt.Fprintf(stdout, "node %d is now the leader of range %d (term %d)\n", tr.Leader, tr.RangeID, tr.Term)
		}
	case "member-add":
		if !asJSON {
			fmt.Fprintf(stderr, "adding node %d (%s); waiting until it has caught up and is a voter...\n", cmd.id, cmd.peerAddr)
		}
		var mr admin.MembersResponse
		req := admin.AddMemberRequest{ID: cmd.id, PeerAddr: cmd.peerAddr}
		if raw, err = c.call(ctx, http.MethodPost, "/v1/members", req, &mr); err == nil && !asJSON {
			fmt.Fprintf(stdout, "added node %d (%s) as a voter\n\n", cmd.id, cmd.peerAddr)
			writeMembers(stdout, mr)
		}
	case "member-remove":
		var mr admin.MembersResponse
		if raw, err = c.call(ctx, http.MethodDelete, fmt.Sprintf("/v1/members/%d", cmd.id), nil, &mr); err == nil && !asJSON {
			fmt.Fprintf(stdout, "removed node %d\n\n", cmd.id)
			writeMembers(stdout, mr)
		}
	case "transfer-leader":
		var tr admin.TransferLeaderResponse
		req := admin.TransferLeaderRequest{ID: cmd.id}
		if raw, err = c.call(ctx, http.MethodPost, "/v1/transfer-leader", req, &tr); err == nil && !asJSON {
			fmt.Fprintf(stdout, "node %d is now the leader\n", tr.Leader)
		}
	default:
		return fmt.Errorf("internal error: unknown ctl op %q", cmd.op)
	}
	if err != nil {
		return err
	}
	if asJSON {
		stdout.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	}
	return nil
}

// healthTimeout bounds `ctl health` unless --timeout is given: a health
// check wants a quick answer.
const healthTimeout = 5 * time.Second

// health asks the node's /readyz (open even with an admin token) and prints
// one line: "ready" (nil error) or why not (an error: exit status 1).
func (c *ctlClient) health(ctx context.Context, stdout io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			if ue.Timeout() {
				return fmt.Errorf("not ready: no answer from kvorum admin at %s within %v", c.addr, c.http.Timeout)
			}
			err = ue.Err
		}
		return fmt.Errorf("not ready: cannot reach kvorum admin at %s: %v", c.addr, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(strings.SplitN(strings.TrimSpace(string(raw)), "\n", 2)[0])
	switch {
	case resp.StatusCode == http.StatusOK:
		fmt.Fprintf(stdout, "ready (%s)\n", c.addr)
		return nil
	case resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(msg, "not ready"):
		return fmt.Errorf("%s (%s)", msg, c.addr)
	default:
		return fmt.Errorf("not ready: unexpected answer from %s (is it a kvorum admin address?): HTTP %d: %s",
			c.addr, resp.StatusCode, truncate(msg, 200))
	}
}

// writeStatus prints a status as aligned "key: value" lines followed by the
// member table.
func writeStatus(w io.Writer, st admin.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	kv("node", st.NodeID)
	kv("role", orDash(st.Role))
	leader := "unknown (no leader)"
	if st.Leader != 0 {
		leader = strconv.FormatUint(st.Leader, 10)
		if st.Leader == st.NodeID {
			leader += " (this node)"
		}
	}
	kv("leader", leader)
	kv("term", st.Term)
	ready := "yes"
	if !st.Ready {
		ready = "no"
	}
	kv("ready", ready)
	kv("cluster id", fmt.Sprintf("%016x", st.ClusterID))
	kv("commit index", st.CommitIndex)
	kv("applied index", st.AppliedIndex)
	kv("log", fmt.Sprintf("%d..%d (first..last index)", st.FirstIndex, st.LastIndex))
	kv("client addr", orDash(st.ClientAddr))
	if st.ClientListenAddr != "" {
		kv("client listen addr", st.ClientListenAddr)
	}
	if st.TLSClientAddr != "" {
		kv("tls client addr", st.TLSClientAddr)
	}
	kv("peer addr", orDash(st.PeerAddr))
	if st.PeerListenAddr != "" {
		kv("peer listen addr", st.PeerListenAddr)
	}
	kv("admin addr", orDash(st.AdminAddr))
	kv("version", orDash(st.Version))
	voters, learners := 0, 0
	for _, m := range st.Members {
		if m.Learner {
			learners++
		} else {
			voters++
		}
	}
	kv("members", fmt.Sprintf("%d voter(s), %d learner(s)", voters, learners))
	kv("ranges", fmt.Sprintf("%d, %d led by this node (kvorum ctl range list)", st.Ranges, st.RangesLeading))
	tw.Flush()
	if len(st.Members) > 0 {
		fmt.Fprintln(w)
		writeMembers(w, admin.MembersResponse{NodeID: st.NodeID, Leader: st.Leader, Members: st.Members})
	}
}

// writeMembers prints the members as an aligned table. MATCH (the leader's
// replication progress) is shown only when the answering node leads.
func writeMembers(w io.Writer, mr admin.MembersResponse) {
	if len(mr.Members) == 0 {
		fmt.Fprintln(w, "no members")
		return
	}
	members := slices.Clone(mr.Members)
	slices.SortFunc(members, func(a, b admin.Member) int { return cmp.Compare(a.ID, b.ID) })
	counts := slices.ContainsFunc(members, func(m admin.Member) bool { return m.Replicas > 0 })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if counts {
		fmt.Fprintln(tw, "ID\tPEER ADDR\tROLE\tMATCH\tRANGES\tLEADING")
	} else {
		fmt.Fprintln(tw, "ID\tPEER ADDR\tROLE\tMATCH")
	}
	for _, m := range members {
		role := "voter"
		switch {
		case m.Learner:
			role = "learner"
		case m.ID == mr.Leader:
			role = "leader"
		}
		match := "-"
		if mr.Leader != 0 && mr.NodeID == mr.Leader {
			match = strconv.FormatUint(m.Match, 10)
		}
		if counts {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\n", m.ID, m.PeerAddr, role, match, m.Replicas, m.Leading)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", m.ID, m.PeerAddr, role, match)
	}
	tw.Flush()
}

// writeRanges prints one line per range: the replicas as node ids, the
// leader's marked with '*' and learners' with '(l)'.
func writeRanges(w io.Writer, rr admin.RangesResponse) {
	if len(rr.Ranges) == 0 {
		fmt.Fprintln(w, "no ranges")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANGE\tSLOTS\tGEN\tROLE\tLEADER\tTERM\tAPPLIED\tREPLICAS\tSIZE\tREADS/S\tWRITES/S")
	for _, r := range rr.Ranges {
		reps := make([]string, 0, len(r.Replicas))
		for _, m := range r.Replicas {
			s := strconv.FormatUint(m.ID, 10)
			if m.ID == r.Leader {
				s += "*"
			}
			if m.Learner {
				s += "(l)"
			}
			reps = append(reps, s)
		}
		leader := "-"
		if r.Leader != 0 {
			leader = strconv.FormatUint(r.Leader, 10)
		}
		slots := "-"
		if r.EndSlot > r.StartSlot {
			slots = fmt.Sprintf("%d-%d", r.StartSlot, r.EndSlot-1)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.RangeID, slots, r.Generation, r.Role, leader, r.Term,
			r.AppliedIndex, strings.Join(reps, ","), sizeString(r.ApproximateBytes), rateString(r.ReadsPerSec), rateString(r.WritesPerSec))
	}
	tw.Flush()
	if rr.HoleSlots > 0 {
		fmt.Fprintf(w, "%d hash slots are owned by no range on this node (a split it has not received yet)\n", rr.HoleSlots)
	}
}

// rateString prints a rate per second: one decimal below 100.
func rateString(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// sizeString prints a byte count in binary units, one decimal.
func sizeString(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
