package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/eventlog"
	"github.com/tranche-dev/tranche/tranchetest"
)

var ctxT = context.Background()

// Every event of a run is one line, its MarshalJSON, in the order the
// hook saw them.
func TestWriterLines(t *testing.T) {
	var buf bytes.Buffer
	w := eventlog.NewWriter(&buf)
	rec := new(tranchetest.Recorder)
	a := tranchetest.Rows("a", []tranche.Row{{"day": "2026-01-01"}})
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day, Column: "day"}
	a.Destinations = []tranche.Destination{new(tranche.MemoryDestination)}
	runner := tranche.Runner{OnEvent: tranche.Hooks(rec.OnEvent, w.OnEvent)}
	res, err := runner.Run(ctxT, tranchetest.NewDAG(t, a), tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	tranchetest.RequireSucceeded(t, res, err)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, e := range rec.Events() {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want.Write(b)
		want.WriteByte('\n')
	}
	if got := buf.String(); got != want.String() || strings.Count(got, "\n") < 6 {
		t.Errorf("the writer wrote\n%s\nwant the events' JSON, one a line:\n%s", got, want.String())
	}
}

type brokenWriter struct{ n int }

func (w *brokenWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestWriterError(t *testing.T) {
	bw := new(brokenWriter)
	w := eventlog.NewWriter(bw)
	w.OnEvent(ctxT, tranche.Event{Kind: tranche.KindRunStarted, RunID: "r"})
	w.OnEvent(ctxT, tranche.Event{Kind: tranche.KindRunSucceeded, RunID: "r"})
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), `writing event run.started of run "r": disk full`) {
		t.Errorf("Err() = %v", err)
	}
	if bw.n != 1 {
		t.Errorf("%d writes after an error, want none", bw.n-1)
	}
	w = eventlog.NewWriter(new(bytes.Buffer))
	w.OnEvent(ctxT, tranche.Event{Kind: tranche.KindLog, Attrs: []slog.Attr{slog.Any("f", func() {})}})
	if err := w.Err(); err != nil {
		t.Errorf("an attribute JSON cannot encode should be written as text: %v", err)
	}
}
