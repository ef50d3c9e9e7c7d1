package main

import (
	"strings"
	"testing"
)

func TestStartAdvertiseFlags(t *testing.T) {
	for _, c := range []struct {
		args         []string
		peer, client string // the advertised addresses parsed
		wantErr      string
	}{
		{args: nil},
		{args: []string{"--peer-addr", "0.0.0.0:7379", "--advertise-peer-addr", "kv1:7379", "--client-addr", "0.0.0.0:6379", "--advertise-client-addr", "db.example:16379"},
			peer: "kv1:7379", client: "db.example:16379"},
		{args: []string{"--id", "1", "--initial-cluster", "1=kv1:7379,2=kv2:7379", "--peer-addr", "0.0.0.0:7379"}, peer: "kv1:7379"},
		{args: []string{"--id", "1", "--initial-cluster", "1=kv1:7379,2=kv2:7379", "--advertise-peer-addr", "kv9:7379"}, wantErr: "differs from this node's --initial-cluster entry"},
		{args: []string{"--advertise-peer-addr", "0.0.0.0:7379"}, wantErr: "advertise an address others can dial"},
		{args: []string{"--advertise-client-addr", "[::]:6379"}, wantErr: "advertise an address others can dial"},
		{args: []string{"--advertise-peer-addr", "kv1"}, wantErr: "not HOST:PORT"},
		{args: []string{"--id", "4", "--join", "kv1:7379", "--peer-addr", "0.0.0.0:7379"}, wantErr: "set --advertise-peer-addr"},
		{args: []string{"--id", "4", "--join", "kv1:7379", "--peer-addr", "0.0.0.0:7379", "--advertise-peer-addr", "kv4:7379"}, peer: "kv4:7379"},
	} {
		f, err := parseStart(append([]string{"--data-dir", "/d"}, c.args...), nil)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: got %v; want an error with %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if f.cfg.AdvertisePeerAddr != c.peer || f.cfg.AdvertiseClientAddr != c.client {
			t.Errorf("%v: advertise peer %q client %q; want %q %q", c.args, f.cfg.AdvertisePeerAddr, f.cfg.AdvertiseClientAddr, c.peer, c.client)
		}
	}
}
