// Package testport hands out loopback addresses for test servers.
//
// Ports come from a process-wide counter below the kernel's ephemeral
// range (32768 and up on Linux), starting at an offset derived from the
// process id so that concurrent test processes mostly use different
// ports. Ports from ":0" are ephemeral: once released, any outgoing
// connection of any process may take one, so a node stopped and restarted
// on "its" port could find it taken; ports from here are not handed out
// for outgoing connections.
//
// Addr returns "127.0.0.1:port" for a port that was free a moment ago and
// that this process has not handed out recently; AddrOn does the same on
// another loopback host (127.0.0.2, ...). Whoever starts nodes whose
// addresses must outlive a restart uses it: the in-process clusters of
// internal/server's tests and internal/torture, the process tests
// (tests/process, pkg/kvlock's cluster tests) and the local clusters
// internal/lockbench starts.
package testport
