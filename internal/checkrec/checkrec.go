// Package checkrec records the failures of a test kit's checks run
// outside a test, for the entry points that return them as errors
// (destinationtest.TestDestination, ledgertest.TestLedger), as
// slogtest.TestHandler does: a [*T] takes the calls a check makes of
// its *testing.T and keeps what failed.
package checkrec

import (
	"fmt"
	"runtime"
	"sync"
)

// T records failures instead of reporting them to a test. Fatal and
// Fatalf end the goroutine, as testing.T's do, which [Isolate] runs each
// check on. A check's own goroutines may call Errorf: the records are
// guarded.
type T struct {
	prefix string // the kit's name, which begins every record
	name   string
	parent *T // the check a subcheck belongs to, which holds its records

	mu     sync.Mutex
	failed bool
	msgs   []error
}

// New returns the recorder of check name of kit prefix: its records read
// "PREFIX: NAME: message".
func New(prefix, name string) *T { return &T{prefix: prefix, name: name} }

// Sub returns the recorder of subcheck name, whose failures are its
// parent's too.
func (e *T) Sub(name string) *T { return &T{prefix: e.prefix, name: e.name + "/" + name, parent: e} }

func (e *T) root() *T {
	for e.parent != nil {
		e = e.parent
	}
	return e
}

// Helper does nothing: a record names its check, not a line.
func (e *T) Helper() {}

// Logf discards the log: only failures are returned.
func (e *T) Logf(string, ...any) {}

// Errorf records a failure.
func (e *T) Errorf(format string, args ...any) { e.fail(fmt.Sprintf(format, args...)) }

// Fatal records a failure and ends the goroutine.
func (e *T) Fatal(args ...any) {
	e.fail(fmt.Sprint(args...))
	runtime.Goexit()
}

// Fatalf records a failure and ends the goroutine.
func (e *T) Fatalf(format string, args ...any) {
	e.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (e *T) fail(msg string) {
	r := e.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Errorf("%s: %s: %s", e.prefix, e.name, msg))
	for x := e; x != nil; x = x.parent {
		x.failed = true
	}
}

// Failed reports whether the check, or a subcheck of it, failed.
func (e *T) Failed() bool {
	r := e.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.failed
}

// Errs returns the failures recorded, the subchecks' included.
func (e *T) Errs() []error {
	r := e.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs
}

// Isolate runs f on a goroutine of its own and waits for it, so that a
// Fatal (runtime.Goexit) ends f alone.
func Isolate(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
