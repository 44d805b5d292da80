package sqlledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
)

// What a database failure under a ledger was, as a [Dialect] classifies
// it; match them with errors.Is.
var (
	ErrLocked      = errors.New("sqlledger: database locked")
	ErrFull        = errors.New("sqlledger: database or disk full")
	ErrReadOnly    = errors.New("sqlledger: database read-only")
	ErrNotDatabase = errors.New("sqlledger: not a database")
	ErrCorrupt     = errors.New("sqlledger: database corrupt")
	ErrCantOpen    = errors.New("sqlledger: database cannot be opened")
	ErrIO          = errors.New("sqlledger: input/output error")
)

// ErrNoLedger is matched by the error of [Open] with [Options.Existing]
// when the database holds no ledger: nothing was created in it.
var ErrNoLedger = errors.New("sqlledger: no ledger in the database")

// Error is a database failure during an operation of a ledger, or of an
// SQL destination (package destination/sqldest, whose transaction was
// then rolled back). Its message names the ledger or destination (the
// file, for SQLite), the operation and, when the dialect knows, what went
// wrong in words. It matches Class and the driver's error with errors.Is
// and errors.As.
type Error struct {
	Name  string // the ledger's or destination's name, such as "sqlite ledger /var/lib/tranche/ledger.db"
	Op    string // what it was doing, such as "claiming 2026-01-31"
	Class error  // ErrLocked, ErrFull, ...; nil when the dialect did not say
	Hint  string // what the failure means and what to do; may be empty
	Err   error  // the driver's error
}

func (e *Error) Error() string {
	msg := "tranche: " + e.Name + ": " + e.Op + ": "
	if e.Hint != "" {
		msg += e.Hint + ": "
	}
	return msg + e.Err.Error()
}

// Unwrap returns Class, when set, and the driver's error.
func (e *Error) Unwrap() []error {
	if e.Class == nil {
		return []error{e.Err}
	}
	return []error{e.Class, e.Err}
}

// SchemaError refuses a database whose ledger schema is newer than this
// release of tranche knows: a newer release migrated it, and this one
// could misread it. With [Options.Existing], it also refuses a schema
// older than this release's (Found < Known), which Open without the
// option would migrate. Nothing was written.
type SchemaError struct {
	Ledger string // the ledger's name, as [Options.Name] gives it
	Found  int    // the database's schema version
	Known  int    // the newest version this release knows, [SchemaVersion]
}

func (e *SchemaError) Error() string {
	if e.Found < e.Known {
		return fmt.Sprintf("tranche: %s: its schema is version %d, older than version %d, which this release of tranche reads; upgrade it by running a worker built with this release on it (a worker's open migrates the ledger; a command that reads or amends one migrates none), or use the tranche command of the release that wrote it",
			e.Ledger, e.Found, e.Known)
	}
	return fmt.Sprintf("tranche: %s: its schema is version %d, newer than version %d, the newest this release of tranche knows; open it with the release that migrated it, or a newer one",
		e.Ledger, e.Found, e.Known)
}

// isError reports whether err is an [*Error] already.
func isError(err error) bool {
	_, ok := errors.AsType[*Error](err)
	return ok
}

// wrap turns a failure of op into an [*Error], leaving alone the ledger's
// own errors and the context's.
func (l *Ledger) wrap(ctx context.Context, op string, err error) error {
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)) &&
		!errors.Is(err, ledger.ErrNotClaimable) && !errors.Is(err, ledger.ErrFenced) && !errors.Is(err, ledger.ErrUnknownBackfill) &&
		!isError(err) {
		// A call that outlived its deadline: the dialect may know that
		// the driver gave up the connection with the call in flight,
		// whose outcome is then unknown.
		e := err
		if !errors.Is(e, context.DeadlineExceeded) {
			e = fmt.Errorf("%w (%w)", ctx.Err(), e) // the driver's words for it
		}
		if class, hint, _ := l.dialect.classify(e); class != nil {
			return &Error{Name: l.name, Op: op, Class: class, Hint: hint, Err: e}
		}
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		// The driver reports an interrupted statement in its own words.
		return fmt.Errorf("tranche: %s: %s: %w (%w)", l.name, op, ctx.Err(), err)
	case errors.Is(err, ledger.ErrNotClaimable), errors.Is(err, ledger.ErrFenced), errors.Is(err, ledger.ErrUnknownBackfill),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if _, ok := errors.AsType[*SchemaError](err); ok {
		return err
	}
	class, hint, _ := l.dialect.classify(err)
	return &Error{Name: l.name, Op: op, Class: class, Hint: hint, Err: err}
}
