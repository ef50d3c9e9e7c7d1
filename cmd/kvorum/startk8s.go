package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/resp"
	"github.com/kvorum/kvorum/internal/tlsconf"
	"github.com/kvorum/kvorum/internal/transport"
)

// The flags of `kvorum start` for orchestrators, kept apart from start.go:
//
//   - --id-from-name and --join-from-ordinal let every pod of a Kubernetes
//     StatefulSet run the same command line (a FROM scratch image has no
//     shell to branch on the pod's ordinal): the node id is the ordinal
//     plus one, and the pods from a given ordinal on join the running
//     cluster instead of founding it (deploy/kubernetes).
//   - --validate-config checks a command line as start would and exits,
//     without opening the data directory, binding a port or dialing a peer
//     (tests/deploy runs every manifest's command line through it).

var orchestrationFlagGroup = flagGroup{
	"Orchestration (one command line for every pod of a StatefulSet; checking a command line)",
	[]string{"id-from-name", "join-from-ordinal", "validate-config"},
}

// orchestrationFlags are the values of the flags above.
type orchestrationFlags struct {
	idFromName      string
	joinFromOrdinal int
	validateOnly    bool
	// ordinal is the one --id-from-name named (-1 without it).
	ordinal int
}

func addOrchestrationFlags(fs *flag.FlagSet, o *orchestrationFlags) {
	fs.StringVar(&o.idFromName, "id-from-name", "", "take the node id from `NAME`, a StatefulSet pod's name (or host name) ending\nin -ORDINAL, such as kvorum-2 (pass $(POD_NAME)): the id is ORDINAL+1;\nexcludes --id (default: none)")
	fs.IntVar(&o.joinFromOrdinal, "join-from-ordinal", 0, "with --id-from-name: a node whose ordinal is `N` or more joins the running\ncluster through --join and ignores --initial-cluster; one below N founds it\nwith --initial-cluster and ignores --join; 0 turns the rule off (then the\ntwo flags exclude each other)")
	fs.BoolVar(&o.validateOnly, "validate-config", false, "check the command line as a start would (flags, their combinations, the TLS,\ntoken and ACL files they name), print a one-line summary and exit 0, or\nthe error a start would give and exit non-zero; opens no data directory,\nbinds no port, contacts no peer")
}

// nameOrdinal returns the ordinal a StatefulSet pod's name ends with:
// the digits after the last '-' of its first DNS label ("kvorum-2" and
// "kvorum-2.kvorum.ns.svc.cluster.local" both give 2).
func nameOrdinal(name string) (int, error) {
	label, _, _ := strings.Cut(strings.TrimSpace(name), ".")
	i := strings.LastIndexByte(label, '-')
	if label == "" || i < 0 || i == len(label)-1 {
		return 0, fmt.Errorf("%q does not end in -ORDINAL (a StatefulSet pod name such as kvorum-0)", name)
	}
	digits := label[i+1:]
	n, err := strconv.ParseUint(digits, 10, 31)
	if err != nil || (len(digits) > 1 && digits[0] == '0') {
		return 0, fmt.Errorf("%q does not end in -ORDINAL: %q is not a decimal ordinal", name, digits)
	}
	return int(n), nil
}

// applyOrchestration applies --id-from-name and --join-from-ordinal to f
// before start's own checks: it sets the id and, under the ordinal rule,
// drops whichever of --initial-cluster and --join this node does not use.
func applyOrchestration(f *startFlags, set map[string]bool) error {
	o := &f.orch
	o.ordinal = -1
	if set["join-from-ordinal"] && !set["id-from-name"] {
		return errors.New("--join-from-ordinal needs --id-from-name (the ordinal comes from the name)")
	}
	if o.joinFromOrdinal < 0 {
		return fmt.Errorf("--join-from-ordinal %d: want an ordinal, 1 or more (0: off)", o.joinFromOrdinal)
	}
	if !set["id-from-name"] {
		return nil
	}
	if set["id"] {
		return errors.New("--id and --id-from-name exclude each other")
	}
	ord, err := nameOrdinal(o.idFromName)
	if err != nil {
		return fmt.Errorf("--id-from-name: %v", err)
	}
	o.ordinal = ord
	f.cfg.ID = uint64(ord) + 1
	if o.joinFromOrdinal == 0 {
		return nil
	}
	if ord >= o.joinFromOrdinal {
		if f.cfg.Join == "" {
			return fmt.Errorf("--id-from-name %s: ordinal %d is at least --join-from-ordinal %d, so this node joins: --join is required", o.idFromName, ord, o.joinFromOrdinal)
		}
		f.initialCluster = ""
		return nil
	}
	if strings.TrimSpace(f.initialCluster) == "" {
		return fmt.Errorf("--id-from-name %s: ordinal %d is below --join-from-ordinal %d, so this node founds the cluster: --initial-cluster is required", o.idFromName, ord, o.joinFromOrdinal)
	}
	f.cfg.Join = ""
	return nil
}

// validateConfig is `kvorum start --validate-config` after parseStart's
// checks: the rest of what a start checks before it opens the data
// directory, then the summary.
func validateConfig(f *startFlags, stdout io.Writer) error {
	c := f.cfg
	c.Logger = nil
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("starting node: %w", err)
	}
	// The files a start reads before it opens anything, read the same
	// way (no goroutine or listener comes with them).
	if c.TLSClientAddr != "" {
		if _, err := tlsconf.Server(tlsconf.Files{Cert: c.TLSCertFile, Key: c.TLSKeyFile, CA: c.TLSCAFile,
			CertFlag: "--tls-cert-file", KeyFlag: "--tls-key-file", CAFlag: "--tls-ca-cert-file"}, nil); err != nil {
			return fmt.Errorf("starting node: %w", err)
		}
	}
	if c.AdminAddr != "-" && c.AdminTLSCertFile != "" {
		if _, err := tlsconf.Server(tlsconf.Files{Cert: c.AdminTLSCertFile, Key: c.AdminTLSKeyFile, CA: c.AdminTLSCAFile,
			CertFlag: "--admin-tls-cert-file", KeyFlag: "--admin-tls-key-file", CAFlag: "--admin-tls-ca-cert-file"}, nil); err != nil {
			return fmt.Errorf("starting node: %w", err)
		}
	}
	if c.PeerTLS.Enabled() {
		if _, err := transport.NewPeerTLS(c.PeerTLS, nil); err != nil {
			return fmt.Errorf("starting node: %w", err)
		}
	}
	if c.ACLFile != "" {
		content, err := os.ReadFile(c.ACLFile)
		if err != nil {
			return fmt.Errorf("starting node: --aclfile: %w", err)
		}
		reg := acl.NewRegistry(resp.ACLCommands(kv.Table{}.Specs()))
		if err := reg.Load(c.ACLFile, content); err != nil {
			return fmt.Errorf("starting node: --aclfile %s: %v", c.ACLFile, err)
		}
	}
	if fi, err := os.Stat(c.DataDir); err == nil && !fi.IsDir() {
		return fmt.Errorf("starting node: --data-dir %s is not a directory", c.DataDir)
	}
	fmt.Fprintf(stdout, "kvorum start: configuration OK: %s\n", configSummary(f))
	return nil
}

// configSummary is the one line --validate-config prints.
func configSummary(f *startFlags) string {
	c := &f.cfg
	var role string
	switch {
	case c.InitialCluster != nil:
		role = fmt.Sprintf("node %d founds a cluster of %d (nodes %s) if %s is empty", c.ID, len(c.InitialCluster), idList(c.InitialCluster), c.DataDir)
	case c.Join != "":
		role = fmt.Sprintf("node %d joins through %s if %s is empty", c.ID, c.Join, c.DataDir)
	case c.ID != 0:
		role = fmt.Sprintf("node %d forms a single-node cluster if %s is empty", c.ID, c.DataDir)
	default:
		role = fmt.Sprintf("restarts the node in %s", c.DataDir)
	}
	if f.orch.ordinal >= 0 {
		role = fmt.Sprintf("ordinal %d: %s", f.orch.ordinal, role)
	}
	peer := c.PeerAddr
	if c.AdvertisePeerAddr != "" && c.AdvertisePeerAddr != c.PeerAddr {
		peer += " (advertised " + c.AdvertisePeerAddr + ")"
	}
	client := c.ClientAddr
	if client == "-" {
		client = "off"
	}
	if c.TLSClientAddr != "" {
		client += ", TLS " + c.TLSClientAddr
	}
	admin := c.AdminAddr
	if admin == "-" {
		admin = "off"
	}
	return fmt.Sprintf("%s; client %s; peer %s; admin %s", role, client, peer, admin)
}
