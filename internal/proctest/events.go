package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
)

// Events is the backfill the ledgers' worker processes run: one daily
// asset, "events", which writes Rows rows a partition ({day, n, worker,
// attempt}) into a files destination under Dest, and appends a line to
// Log when each execution starts and when it ends ("start KEY WORKER
// ATTEMPT", "done ..."), so that a test can count executions across
// processes killed at any point.
type Events struct {
	Worker string
	Dest   string
	Log    io.Writer // a file opened with O_APPEND, shared by the workers
	Rows   int

	// Work is the asset's work on a partition, between its two lines;
	// its error fails the execution.
	Work func(ctx context.Context, key string) error

	// Destination, when not nil, receives the rows in place of the
	// files destination under Dest: an SQL destination of EventsTable
	// and AuditTable, in the process tests of the SQL destinations.
	Destination tranche.Destination

	// Pause, when its At is not "", makes the worker stop itself once
	// on a partition (see Pause and PausePoints), so that a test can
	// make it a zombie there.
	Pause Pause

	// Version, when not "", adds to the DAG an asset named after it,
	// which writes nothing: a changed DAG, of another identity, as a
	// deploy makes (see EventsDAG).
	Version string

	// Name, when not "", names the DAG (tranche.DAG.Name): DAGs of one
	// name are versions of one DAG, so that the old version's backfill
	// leaves what the new one landed (see ledger.ClaimRequest.JudgeVersion).
	// NewDAG names the events DAG "events" and a Version's
	// "events+deploy_VERSION", which link no versions.
	Name string

	// Audit, when not nil, receives a line for every batch the files
	// destination wrote ("wrote KEY WORKER TOKEN"), once its write
	// returned: the destination's history, which replacing the files
	// hides.
	Audit io.Writer
}

// audited is a destination that reports each batch it wrote.
type audited struct {
	tranche.Destination
	worker string
	w      io.Writer
}

func (d audited) Write(ctx context.Context, batches []tranche.Batch) error {
	// A line before the write too: a worker stopped between its write's
	// return and its "wrote" line logs it after writes that landed later,
	// so the order of "wrote" lines alone is not the order of landing.
	for _, b := range batches {
		fmt.Fprintf(d.w, "writing %s %s %d\n", b.Partition.Key(), d.worker, b.Token)
	}
	if err := d.Destination.Write(ctx, batches); err != nil {
		return err
	}
	for _, b := range batches {
		fmt.Fprintf(d.w, "wrote %s %s %d\n", b.Partition.Key(), d.worker, b.Token)
	}
	return nil
}

// Backfill returns a backfill of the events asset over w.
func (e Events) Backfill(w tranche.TimePartitionWindow, l ledger.Ledger) (*backfill.Backfill, error) {
	var attempts sync.Map // run id -> the ledger's attempt number
	logLine := func(what, key string, attempt int) {
		// One write per line under O_APPEND: lines of several workers
		// never interleave.
		fmt.Fprintf(e.Log, "%s %s %s %d\n", what, key, e.Worker, attempt)
	}
	var dest tranche.Destination = &files.Destination{Dir: e.Dest}
	if e.Destination != nil {
		dest = e.Destination
	}
	if e.Audit != nil {
		dest = audited{dest, e.Worker, e.Audit}
	}
	pause := &pauser{Pause: e.Pause, worker: e.Worker, log: e.Log}
	switch e.Pause.At {
	case "", PauseMaterialize, PauseBeforeWrite:
	case PauseWrite, PauseStaged:
		// Outside the audit: a write the destination took is audited
		// when it took it, not when the worker resumes.
		where := ""
		if e.Destination != nil {
			where = "done"
			if s, ok := e.Destination.(interface{ Shared() bool }); ok && s.Shared() {
				where = "err"
			}
		}
		dest = pausing{dest, pause, where}
	default:
		return nil, fmt.Errorf("proctest: pause at %q: want one of %v", e.Pause.At, PausePoints)
	}
	asset := tranche.Asset{
		Name:         "events",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{dest},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			if err != nil {
				return nil, err
			}
			attempt := 0
			if v, ok := attempts.Load(m.RunID()); ok {
				attempt = v.(int)
			}
			key := p.Key()
			logLine("start", key, attempt)
			if e.Pause.At == PauseMaterialize {
				pause.stop(key)
			}
			if err := e.Work(ctx, key); err != nil {
				return nil, err
			}
			out := make([]tranche.Row, e.Rows)
			for i := range out {
				out[i] = tranche.Row{"day": key, "n": i, "worker": e.Worker, "attempt": attempt}
			}
			if e.Pause.At == PauseWrite && e.Destination == nil && key == e.Pause.Key && len(out) > 0 {
				out[0]["mark"] = writePause{pause, key}
			}
			logLine("done", key, attempt)
			return out, nil
		},
	}
	assets := []tranche.Asset{asset}
	if e.Version != "" {
		assets = append(assets, tranche.Asset{Name: "deploy_" + e.Version,
			Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC},
			Materialize:  func(context.Context, *tranche.Materialization) ([]tranche.Row, error) { return nil, nil }})
	}
	dag, err := tranche.NewDAG(assets...)
	if err != nil {
		return nil, err
	}
	if e.Name != "" {
		dag.Name = e.Name
	}
	return &backfill.Backfill{
		DAG: dag, Window: w, Ledger: l, Worker: e.Worker, OnFailure: tranche.FailContinue,
		Runner: &tranche.Runner{OnEvent: func(_ context.Context, ev tranche.Event) {
			if ev.Kind == tranche.KindRunStarted {
				attempts.Store(ev.RunID, ev.Attempt)
			}
			if e.Pause.At == PauseBeforeWrite && ev.Kind == tranche.KindWriteStarted {
				pause.stop(ev.Target)
			}
		}},
	}, nil
}

// EventsDAG returns the identity of the events DAG, of the given
// Version ("" for the first).
func EventsDAG(t testing.TB, version ...string) string {
	t.Helper()
	v := ""
	if len(version) > 0 {
		v = version[0]
	}
	b, err := Events{Version: v, Work: func(context.Context, string) error { return nil }}.Backfill(tranche.TimePartitionWindow{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return backfill.DAGIdentity(b.DAG, tranche.Day, time.UTC)
}

// Execution is a line of the executions log.
type Execution struct {
	What, Key, Worker string // what: "start" or "done"
	Attempt           int
}

// Executions reads the executions log at path; a missing log holds none.
func Executions(t testing.TB, path string) []Execution {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []Execution
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue // a line cut short by a kill
		}
		n, _ := strconv.Atoi(f[3])
		out = append(out, Execution{f[0], f[1], f[2], n})
	}
	return out
}

// Row is a row of the events asset as the files destination holds it.
type Row struct {
	Day     string `json:"day"`
	N       int    `json:"n"`
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
}

// Write is a line of an audit log (see Events.Audit).
type Write struct {
	Key, Worker string
	Token       int64
	// Began is the index, among the log's writes, of the first write
	// that returned after this one began ("writing"): the writes before
	// it landed before this one began.
	Began int
}

// Writes reads the audit log at path, in the order of its lines; a
// missing log holds none.
func Writes(t testing.TB, path string) []Write {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []Write
	began := map[string]int{} // key worker token -> len(out) when it began
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "wrote" && f[0] != "writing" {
			continue // a line cut short by a kill
		}
		id := strings.Join(f[1:], " ")
		if f[0] == "writing" {
			began[id] = len(out)
			continue
		}
		n, _ := strconv.ParseInt(f[3], 10, 64)
		b, ok := began[id]
		if !ok {
			b = len(out) // a log of "wrote" lines alone
		}
		delete(began, id)
		out = append(out, Write{f[1], f[2], n, b})
	}
	return out
}

// CheckWrites checks the audit log at path against the ledger's
// histories hs: no write landed after a write of the same partition at
// a newer token (a stale write: the destination's fence let it through),
// and the write at the newest token of each partition is its success's.
// A write that began before the newer one returned may have landed
// before it, its "wrote" line logged after (a worker stopped between the
// two): not stale.
func CheckWrites(t testing.TB, hs map[string][]ledger.Attempt, path string) {
	t.Helper()
	writes := Writes(t, path)
	newest := map[string]Write{}
	for i, wr := range writes {
		for _, prev := range writes[:wr.Began] {
			if prev.Key == wr.Key && prev.Token > wr.Token {
				t.Errorf("partition %s: %s wrote token %d, begun after %s wrote token %d: a stale write landed", wr.Key, wr.Worker, wr.Token, prev.Worker, prev.Token)
				break
			}
		}
		if n, ok := newest[wr.Key]; !ok || wr.Token > n.Token {
			newest[wr.Key] = writes[i]
		}
	}
	for k, h := range hs {
		won := h[len(h)-1]
		if wr := newest[k]; wr.Worker != won.Worker || ledger.TokenAttempt(wr.Token) != won.Number {
			t.Errorf("partition %s: written at the newest token by %q, token %d; the ledger says %s attempt %d succeeded", k, wr.Worker, wr.Token, won.Worker, won.Number)
		}
	}
}

// Rows reads the rows of partition key in the files destination at dest.
func Rows(t testing.TB, dest, key string) []Row {
	t.Helper()
	f, err := os.Open(filepath.Join(dest, "events", "day="+key, "data.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Row
	s := bufio.NewScanner(f)
	for s.Scan() {
		var r Row
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			t.Fatalf("partition %s: row %q: %v", key, s.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// Histories returns the history of each of the events DAG's partitions
// in w, by key.
func Histories(t testing.TB, l ledger.Ledger, w tranche.TimePartitionWindow) map[string][]ledger.Attempt {
	t.Helper()
	dag := EventsDAG(t)
	out := map[string][]ledger.Attempt{}
	for p := range w.OldestFirst() {
		h, err := l.History(t.Context(), dag, p.Start)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Key()] = h
	}
	return out
}
