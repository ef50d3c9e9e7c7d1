package check

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecorderConcurrent(t *testing.T) {
	rec := NewRecorder()
	const clients, per = 8, 500
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				k := "c:" + string(rune('0'+c))
				p := rec.Begin(c, incr(k))
				switch i % 10 {
				case 0:
					p.Fail()
				case 1:
					p.UnknownBecause("i/o timeout")
				default:
					p.Ok(num(int64(i)))
				}
				p.Ok(num(-1)) // ignored: only the first completion counts
				_ = rec.Stats()
			}
		}()
	}
	wg.Wait()
	st := rec.Stats()
	if st.Invoked != clients*per || st.Failed != clients*per/10 || st.Unknown != clients*per/10 || st.Ok != clients*per*8/10 {
		t.Errorf("stats %+v", st)
	}
	if st.Writes != clients*per || st.OkWrites != st.Ok || st.Kinds[OpIncr] != st.Invoked || st.OkKinds[OpIncr] != st.Ok {
		t.Errorf("write stats %+v", st)
	}
	ops := rec.Operations()
	if len(ops) != st.Ok+st.Unknown {
		t.Fatalf("%d operations, want %d (failed ones left out)", len(ops), st.Ok+st.Unknown)
	}
	unknowns := 0
	for i, op := range ops {
		out := op.Output.(Output)
		if i > 0 && op.Call < ops[i-1].Call {
			t.Fatal("operations not in invocation order")
		}
		if out.Unknown {
			unknowns++
			if op.Return != math.MaxInt64 || op.Metadata != "i/o timeout" {
				t.Errorf("unknown operation %+v: want return MaxInt64 and its reason", op)
			}
			continue
		}
		if op.Return < op.Call || out.Int < 0 {
			t.Errorf("operation %+v: return before call, or second completion counted", op)
		}
	}
	if unknowns != st.Unknown {
		t.Errorf("%d unknown operations, want %d", unknowns, st.Unknown)
	}
	if n := len(rec.WriteSuccesses()); n != st.OkWrites {
		t.Errorf("%d write successes, want %d", n, st.OkWrites)
	}
}

func TestRecorderPendingIsUnknown(t *testing.T) {
	rec := NewRecorder()
	rec.Begin(0, set("r", "a")) // never completed
	ops := rec.Operations()
	if len(ops) != 1 || !ops[0].Output.(Output).Unknown || ops[0].Return != math.MaxInt64 {
		t.Fatalf("pending operation: %+v, want unknown", ops)
	}
	if st := rec.Stats(); st.Invoked != 1 || st.Ok+st.Failed+st.Unknown != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestWriteSuccessesAndGaps(t *testing.T) {
	rec := NewRecorder()
	rec.Begin(0, get("r")).Ok(none())                 // a read: not a write
	rec.Begin(0, incr("r")).Ok(errOut(ErrNotInteger)) // an error: not a success
	rec.Begin(0, set("r", "a")).Fail()                // failed
	rec.Begin(0, set("r", "b")).Unknown()             // unknown
	rec.Begin(0, set("r", "c")).Ok(none())            // counts
	rec.Begin(0, setnx("r", "d")).Ok(ok(false))       // counts: it went through
	if ws := rec.WriteSuccesses(); len(ws) != 2 || ws[0] > ws[1] {
		t.Errorf("write successes %v, want 2 sorted", ws)
	}

	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ts := []time.Duration{ms(1), ms(2), ms(5), ms(6)}
	cases := []struct {
		from, to, gap, start time.Duration
	}{
		{0, ms(10), ms(4), ms(6)},              // the tail
		{0, ms(6), ms(3), ms(2)},               // between 2 and 5
		{ms(3), ms(5) + ms(1)/2, ms(2), ms(3)}, // from the start of the window
		{ms(7), ms(9), ms(2), ms(7)},           // no success inside
		{ms(5), ms(5), 0, ms(5)},               // empty window
	}
	for _, c := range cases {
		gap, start := longestGap(ts, c.from, c.to)
		if gap != c.gap || start != c.start {
			t.Errorf("longestGap(%v, %v) = %v at %v, want %v at %v", c.from, c.to, gap, start, c.gap, c.start)
		}
	}
	if gap, _ := rec.LongestGap(0, rec.Now()); gap <= 0 {
		t.Errorf("LongestGap over the recorder = %v", gap)
	}
}

func TestWriteReport(t *testing.T) {
	rec := NewRecorder()
	rec.Begin(0, set("r:0", "v-0-1")).Ok(none())
	rec.Begin(1, get("r:0")).Ok(val("v-0-1"))
	rec.Begin(0, rpush("l:0", "v-0-2")).UnknownBecause("UNCERTAIN")
	rec.Begin(1, lrange("l:0")).Ok(lst("v-0-2"))
	ops := rec.Operations()
	res := Check(ops, 10*time.Second)
	if !res.Linearizable {
		t.Fatalf("not linearizable: %+v", res)
	}
	dir := t.TempDir()
	htmlPath, historyPath, err := res.WriteReport(dir+"/sub", "run1", ops)
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(htmlPath, "run1.html") || len(html) < 1000 || !strings.Contains(string(html), "r:0") || !strings.Contains(string(html), "<html") {
		t.Errorf("%s: %d bytes, want an HTML page naming r:0", htmlPath, len(html))
	}
	data, err := os.ReadFile(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Client   int     `json:"client"`
		Input    Input   `json:"input"`
		Output   *Output `json:"output"`
		InvokeNs int64   `json:"invoke_ns"`
		ReturnNs *int64  `json:"return_ns"`
		Unknown  bool    `json:"unknown"`
		Note     string  `json:"note"`
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatalf("%s: %v", historyPath, err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d entries, want 4", len(entries))
	}
	if e := entries[1]; e.Client != 1 || e.Input.Kind != OpGet || e.Output == nil || e.Output.Value != "v-0-1" || e.ReturnNs == nil || *e.ReturnNs < e.InvokeNs {
		t.Errorf("GET entry %+v", e)
	}
	if e := entries[2]; !e.Unknown || e.Output != nil || e.ReturnNs != nil || e.Note != "UNCERTAIN" || e.Input.Value != "v-0-2" {
		t.Errorf("unknown entry %+v", e)
	}

	// A refuted history renders too (partial linearizations).
	// A refuted history renders too (partial linearizations), showing the
	// refuted key only.
	bad := history(
		op(0, 0, 10, set("r:0", "a"), none()),
		op(1, 20, 30, get("r:0"), val("b")),
		op(1, 20, 30, rpush("l:7", "x"), num(1)),
	)
	res = Check(bad, 10*time.Second)
	if res.Linearizable {
		t.Fatal("refuted history accepted")
	}
	htmlPath, _, err = res.WriteReport(dir, "bad", bad)
	if err != nil {
		t.Fatal(err)
	}
	if html, err = os.ReadFile(htmlPath); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `GET r:0 → \"b\"`) || strings.Contains(string(html), "l:7") {
		t.Errorf("refuted report should show the GET of r:0 and not the linearizable l:7")
	}
}
