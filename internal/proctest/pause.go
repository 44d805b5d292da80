package proctest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/tranche-dev/tranche"
)

// The points of a partition's execution where a worker can stop itself
// (Pause.At), to be made a zombie there.
const (
	// PauseMaterialize stops the worker inside its materializer.
	PauseMaterialize = "materialize"
	// PauseBeforeWrite stops it after the materializer returned, when
	// the runner announces the write (KindWriteStarted), before the
	// worker's own check of its lease.
	PauseBeforeWrite = "beforewrite"
	// PauseWrite stops it inside the destination's Write, past the
	// worker's check of its lease: the files destination while it
	// encodes the rows into its temporary file (a json.Marshaler value
	// of column "mark"); the SQL destination committing on its own once
	// it checked the rows, when it takes a connection for its
	// transaction (the first time it asks its context for Done); the
	// one sharing the ledger when its Write first reads its context,
	// before it checks and stages the rows (which read no context).
	// The write goes on under a context that is never canceled, as a
	// write already past its checks of the context would: what stops a
	// stale write there is the destination's token check (or, for a
	// destination sharing the ledger, the fenced Finish), not the
	// worker's canceling it.
	PauseWrite = "write"
	// PauseStaged stops it once the destination's Write returned and
	// before the ledger records the outcome: for a destination sharing
	// the ledger, between the staged write and the Finish that commits
	// it; for the others, after the write landed.
	PauseStaged = "staged"
)

// PausePoints lists the points, in the order of an execution.
var PausePoints = []string{PauseMaterialize, PauseBeforeWrite, PauseWrite, PauseStaged}

// Pause stops a worker process once (SIGSTOP, sent by the process to
// itself) on partition Key at point At, after logging "pause KEY WORKER
// 0" to the executions log, so that a test knows where it stopped and can
// resume it (SIGCONT).
type Pause struct {
	At, Key string
}

// pauser is a Pause at work in one backfill.
type pauser struct {
	Pause
	worker string
	log    io.Writer
	once   sync.Once
}

func (p *pauser) stop(key string) {
	if key != p.Key {
		return
	}
	p.once.Do(func() {
		fmt.Fprintf(p.log, "pause %s %s 0\n", key, p.worker)
		if err := stopSelf(); err != nil {
			panic(err) // the test cannot go on: say why, loudly
		}
	})
}

// writePause is a value whose JSON encoding, by the files destination
// inside its Write, stops the process.
var _ json.Marshaler = writePause{}

type writePause struct {
	p   *pauser
	key string
}

func (w writePause) MarshalJSON() ([]byte, error) {
	w.p.stop(w.key)
	return []byte("true"), nil
}

// pausing is the destination around the worker's, audit included, that
// stops the process inside an SQL destination's Write (PauseWrite; the
// files destination stops itself, by writePause) or after it
// (PauseStaged). At PauseWrite it reports on stderr what became of the
// write once the worker resumed, which the test logs.
type pausing struct {
	tranche.Destination
	p *pauser
	// where is where PauseWrite stops inside Write: "" for the files
	// destination, which stops itself; "err" or "done", at the first
	// call of the context's Err or Done.
	where string
}

func (d pausing) Write(ctx context.Context, batches []tranche.Batch) error {
	i := slices.IndexFunc(batches, func(b tranche.Batch) bool { return b.Partition.Key() == d.p.Key })
	if i < 0 {
		return d.Destination.Write(ctx, batches)
	}
	if d.p.At == PauseWrite {
		ctx = context.WithoutCancel(ctx)
		if d.where != "" {
			ctx = pauseContext{ctx, d.p, d.where == "err"}
		}
	}
	err := d.Destination.Write(ctx, batches)
	if d.p.At == PauseWrite {
		fmt.Fprintf(os.Stderr, "proctest: %s's write of %s, resumed: %v\n", d.p.worker, d.p.Key, err)
	}
	if d.p.At == PauseStaged && err == nil {
		d.p.stop(d.p.Key)
	}
	return err
}

// pauseContext stops the process the first time the destination's Write
// asks it for Done (or, with onErr, for Err too).
type pauseContext struct {
	context.Context
	p     *pauser
	onErr bool
}

func (c pauseContext) Err() error {
	if c.onErr {
		c.p.stop(c.p.Key)
	}
	return c.Context.Err()
}

func (c pauseContext) Done() <-chan struct{} {
	c.p.stop(c.p.Key)
	return c.Context.Done()
}
