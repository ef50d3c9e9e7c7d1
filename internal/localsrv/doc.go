// Package localsrv starts the servers a benchmark measures as child
// processes on 127.0.0.1 and stops them again, by their PID, and only
// them: a local 3-node kvorum cluster (this binary's 'kvorum start'),
// standalone redis-server processes, or any other server binary (Start).
//
// Ports come from internal/testport (below the ephemeral range, so no
// outgoing connection takes one between the check and the bind). Every
// child writes its output to a log file the caller names; LogTail and
// ExitedError quote its end when a server dies during startup.
//
// Users: internal/lockbench (`kvorum bench locks`) and internal/kvbench
// (`kvorum bench kv`).
package localsrv
