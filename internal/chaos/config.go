package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config is one chaos run.
type Config struct {
	Nodes    int
	Duration time.Duration // of the fault phase
	Seed     int64
	Kinds    []Kind
	// Each fault waits a random time in [IntervalMin, IntervalMax] after
	// the cluster recovered from the previous one.
	IntervalMin, IntervalMax time.Duration
	Clients                  int
	Keys                     int
	OpTimeout                time.Duration

	Network string // ModeAuto, ModeNetns or ModeProxy
	Subnet  string // netns: "A.B.C.0/24"; "" picks one
	// NetnsCut forces the netns cut mechanism ("iptables" or "route");
	// "" uses iptables when it works.
	NetnsCut string

	DataDir string // "" = a new temporary directory
	Keep    bool   // keep the data directory even on success
	OutDir  string // report directory ("" = the data directory, on failure)
	Binary  string // the kvorum binary to run nodes with

	TickInterval      time.Duration
	ElectionTicks     int
	HeartbeatTicks    int
	RequestTimeout    time.Duration
	SnapshotThreshold uint64

	// RecoveryTimeout bounds how long the cluster may take to serve a
	// write again after a fault is healed (and to become fully ready at
	// the end); beyond it the run fails.
	RecoveryTimeout time.Duration
	// CheckTimeout bounds the linearizability check.
	CheckTimeout time.Duration

	// Progress receives one line per fault injected and healed.
	Progress io.Writer
}

// Defaults for the fields the command line leaves unset.
const (
	DefaultNodes             = 3
	DefaultDuration          = 30 * time.Second
	DefaultIntervalMin       = 2 * time.Second
	DefaultIntervalMax       = 4 * time.Second
	DefaultClients           = 4
	DefaultKeys              = 3
	DefaultOpTimeout         = 2 * time.Second
	DefaultTickInterval      = 50 * time.Millisecond
	DefaultElectionTicks     = 10
	DefaultHeartbeatTicks    = 1
	DefaultRequestTimeout    = time.Second
	DefaultSnapshotThreshold = 500
	DefaultRecoveryTimeout   = 20 * time.Second
	DefaultCheckTimeout      = 60 * time.Second
)

// ElectionTimeout is the nodes' base election timeout.
func (c *Config) ElectionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// Validate checks c; the error names the command-line flag at fault.
func (c *Config) Validate() error {
	switch {
	case c.Nodes != 3 && c.Nodes != 5:
		return fmt.Errorf("--nodes must be 3 or 5 (got %d)", c.Nodes)
	case c.Duration <= 0:
		return fmt.Errorf("--duration must be positive (got %v)", c.Duration)
	case len(c.Kinds) == 0:
		return errors.New("--faults: no fault kinds")
	case c.IntervalMin < 0 || c.IntervalMax < c.IntervalMin:
		return fmt.Errorf("--interval: want MIN-MAX with 0 <= MIN <= MAX (got %v-%v)", c.IntervalMin, c.IntervalMax)
	case c.Clients < 1 || c.Clients > 256:
		return fmt.Errorf("--clients must be between 1 and 256 (got %d)", c.Clients)
	case c.Keys < 1:
		return fmt.Errorf("--keys must be positive (got %d)", c.Keys)
	case c.OpTimeout <= 0:
		return fmt.Errorf("--op-timeout must be positive (got %v)", c.OpTimeout)
	case c.Network != ModeAuto && c.Network != ModeNetns && c.Network != ModeProxy:
		if c.Network == "docker" {
			return errors.New("--network docker is not implemented (use auto, netns or proxy)")
		}
		return fmt.Errorf("--network must be auto, netns or proxy (got %q)", c.Network)
	case c.Subnet != "" && c.Network == ModeProxy:
		return errors.New("--subnet applies to --network netns only")
	case c.TickInterval < time.Millisecond:
		return fmt.Errorf("--tick-interval must be at least 1ms (got %v)", c.TickInterval)
	case c.HeartbeatTicks < 1:
		return errors.New("--heartbeat-ticks must be at least 1")
	case c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("--election-ticks (%d) must be greater than --heartbeat-ticks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("--request-timeout must be positive (got %v)", c.RequestTimeout)
	case c.SnapshotThreshold == 0:
		return errors.New("--snapshot-threshold must be positive")
	case c.RecoveryTimeout <= 0:
		return fmt.Errorf("--recovery-timeout must be positive (got %v)", c.RecoveryTimeout)
	case c.CheckTimeout <= 0:
		return fmt.Errorf("--check-timeout must be positive (got %v)", c.CheckTimeout)
	case c.Binary == "":
		return errors.New("--binary: no kvorum binary")
	}
	if c.Subnet != "" {
		if err := ValidateSubnet(c.Subnet); err != nil {
			return err
		}
	}
	return nil
}
