package script

import (
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// A killed run stops at its next instruction with Redis's error, and
// pcall cannot catch it.
func TestKilledRunStops(t *testing.T) {
	src := "local n = 0\nwhile true do pcall(function() n = n + 1 end) redis.call('PING') end"
	s, r := Compile(SHA1Hex([]byte(src)), []byte(src))
	if s == nil {
		t.Fatal(show(r))
	}
	var m Monitor
	run := &Running{Name: SHA1Hex([]byte(src)), Killable: true}
	m.Begin(run)
	done := make(chan reply.Reply, 1)
	started := make(chan struct{})
	go func() { done <- Run(pingCaller(started), s, nil, nil, 1, run) }()
	<-started // the loop runs
	if got := m.Kill(false); got.IsError() {
		t.Fatalf("SCRIPT KILL: %s", show(got))
	}
	got := <-done
	m.End(run)
	want := "ERR:ERR Script killed by user with SCRIPT KILL... script: " + run.Name + ", on @user_script:2."
	wantReply(t, "killed", got, want)
	if m.Active() {
		t.Fatal("run still recorded after End")
	}
	// The pooled state is reused cleanly by the next run.
	wantReply(t, "after", eval(t, &fakeCaller{}, "return 1", nil, nil), int64(1))
}

// A killed function call answers the same error, with the function's name.
func TestKilledFunctionStops(t *testing.T) {
	lib, r := ParseLibrary([]byte("#!lua name=l\nredis.register_function('spin', function() while true do redis.call('PING') end end)"))
	if lib == nil {
		t.Fatal(show(r))
	}
	run := &Running{Name: "spin", Function: true, Killable: true}
	started := make(chan struct{})
	done := make(chan reply.Reply, 1)
	go func() { done <- lib.Call(pingCaller(started), "spin", nil, nil, 1, run) }()
	<-started
	run.kill.Store(true)
	wantReply(t, "killed", <-done, "ERR:ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.")
}

// Kill's answers follow Redis's order of checks against the oldest run.
func TestMonitorKill(t *testing.T) {
	var m Monitor
	wantReply(t, "none", m.Kill(false), "ERR:NOTBUSY No scripts in execution right now.")
	if busy, _ := m.Busy(0); busy {
		t.Fatal("busy with nothing running")
	}
	apply := &Running{Name: "a"}
	m.Begin(apply)
	ro := &Running{Name: "b", Killable: true}
	m.Begin(ro)
	if got := m.Kill(false); !got.IsError() || string(got.Str[:11]) != "UNKILLABLE " {
		t.Fatalf("apply-time run: %s", show(got))
	}
	if ro.kill.Load() {
		t.Fatal("UNKILLABLE killed a run")
	}
	if busy, fn := m.Busy(0); !busy || fn {
		t.Fatalf("Busy(0) = %v, %v", busy, fn)
	}
	if busy, _ := m.Busy(time.Hour); busy {
		t.Fatal("busy before the threshold")
	}
	m.End(apply)
	wantReply(t, "function kill of a script", m.Kill(true), "ERR:"+string(ErrBusyEval.Str))
	fn := &Running{Name: "f", Function: true, Killable: true, Command: [][]byte{[]byte("FCALL_RO"), []byte("f"), []byte("0")}}
	m.Begin(fn)
	if name, cmd, _, ok := m.RunningFunction(); !ok || name != "f" || len(cmd) != 3 {
		t.Fatalf("RunningFunction = %q %q %v", name, cmd, ok)
	}
	if !m.RunningEval() {
		t.Fatal("the oldest run is a script's")
	}
	wantReply(t, "script kill", m.Kill(false), "OK")
	if !ro.kill.Load() || fn.kill.Load() {
		t.Fatal("SCRIPT KILL must stop the scripts, not the function")
	}
	m.End(ro)
	wantReply(t, "script kill of a function", m.Kill(false), "ERR:"+string(ErrBusyFunction.Str))
	wantReply(t, "function kill", m.Kill(true), "OK")
	m.End(fn)
	if m.Active() || len(m.runs) != 0 {
		t.Fatal("runs left")
	}
}

// pingCaller answers PONG and closes started at the first call.
type pingCaller chan struct{}

func (c pingCaller) Call(args [][]byte) reply.Reply {
	select {
	case <-c:
	default:
		close(c)
	}
	return reply.Status("PONG")
}

func (c pingCaller) IsCommand(name []byte) bool { return true }
