package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/transport"
)

// The peer TLS flags of `kvorum start` (etcd's names), kept together here.

var peerTLSFlagGroup = flagGroup{
	"Peer TLS (mutual TLS between nodes: all three flags or none; files re-read when they change)",
	[]string{"peer-cert-file", "peer-key-file", "peer-trusted-ca-file"},
}

func addPeerTLSFlags(fs *flag.FlagSet, f *transport.TLSFiles) {
	fs.StringVar(&f.CertFile, "peer-cert-file", "", "PEM `FILE` with this node's certificate (then any intermediates), issued by\nthe cluster's CA, usable as server and client (serverAuth and clientAuth);\nwith it every peer connection, accepted and dialed, is TLS 1.2+ and each side\nmust present a certificate of the CA in --peer-trusted-ca-file (peer host\nnames are not checked: use a CA dedicated to the cluster); every node of a\ncluster needs the three flags, or none has them (default: none: plain TCP)")
	fs.StringVar(&f.KeyFile, "peer-key-file", "", "PEM `FILE` with the private key of --peer-cert-file")
	fs.StringVar(&f.CAFile, "peer-trusted-ca-file", "", "PEM `FILE` with the CA certificate(s) peers' certificates must chain to;\nthe three files are looked at again at most once a second when a connection\nopens, and re-read when changed: rotate certificates by replacing the files\n(atomically: write, then rename), no restart; open connections carry on")
}

func validatePeerTLSFlags(f transport.TLSFiles) error {
	if f.Enabled() && (f.CertFile == "" || f.KeyFile == "" || f.CAFile == "") {
		return errors.New("--peer-cert-file, --peer-key-file and --peer-trusted-ca-file go together: set all three (mutual TLS between nodes) or none")
	}
	return nil
}

// demoPeerTLS gives every demo node a certificate of a fresh throwaway
// CA, written (with the CA certificate, not its key, which is not kept)
// into dir/peer-tls, and returns that directory. A resumed demo gets a
// new CA: every node's certificate is replaced at once.
func demoPeerTLS(dir string, cfgs []server.Config) (string, error) {
	tlsDir := filepath.Join(dir, "peer-tls")
	ca, err := devca.New("kvorum demo CA")
	if err != nil {
		return "", err
	}
	for i := range cfgs {
		name := fmt.Sprintf("node-%d", cfgs[i].ID)
		cert, err := ca.Issue(name)
		if err != nil {
			return "", err
		}
		files, err := ca.WriteFiles(tlsDir, name, cert)
		if err != nil {
			return "", err
		}
		cfgs[i].PeerTLS = transport.TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}
	}
	return tlsDir, nil
}
