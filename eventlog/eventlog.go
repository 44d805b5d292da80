// Package eventlog writes the events of runs and backfills as JSON
// lines, one object per line, for a file another program tails or a
// pipe it reads:
//
//	log := eventlog.NewWriter(f)
//	runner := tranche.Runner{OnEvent: log.OnEvent}
//	...
//	if err := log.Err(); err != nil { ... }
//
// Each line is the event's [tranche.Event.MarshalJSON]: stable keys, times
// in UTC, the event's deterministic id. The slog hook, which the runner's
// Logger uses, stays in the root package ([tranche.SlogHook]); this
// package holds the sinks that only some programs want.
package eventlog

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/tranche-dev/tranche"
)

// Writer writes events as JSON lines, one object per line. Its
// [Writer.OnEvent] method is a hook; it is safe for concurrent use. Build
// one with [NewWriter].
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// OnEvent writes e as one line. After a write error it writes nothing
// more; [Writer.Err] returns the error.
func (w *Writer) OnEvent(_ context.Context, e tranche.Event) {
	b, err := e.MarshalJSON()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if err != nil {
		w.err = fmt.Errorf("tranche: encoding event %s of run %q: %w", e.Kind, e.RunID, err)
		return
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("tranche: writing event %s of run %q: %w", e.Kind, e.RunID, err)
	}
}

// Err returns the first error met while encoding or writing an event, or
// nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
