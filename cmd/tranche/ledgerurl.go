package main

import (
	"context"
	"fmt"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlite"
)

// openLedger opens, for reading only, the ledger at the address raw
// ([address.Parse]): what serve reads.
func openLedger(ctx context.Context, raw string) (ledger.Reader, error) {
	addr, err := address.Parse(raw)
	if err != nil {
		return nil, err
	}
	return openAddress(ctx, addr, address.AccessRead)
}

// openAddress opens the ledger at addr for access, but never for more
// than [address.AccessWrite]: the command never creates a ledger's file,
// schema or tables, nor migrates an older ledger under the workers of
// the release that wrote it; and it reads (ls, status, history, serve)
// without writing, so that a read-only file, or a role allowed only
// SELECT, can be read. The ledger it returns is an io.Closer, which
// tranchecli closes.
func openAddress(ctx context.Context, addr address.Address, access address.Access) (ledger.Reader, error) {
	access = min(access, address.AccessWrite)
	switch addr.Scheme {
	case address.SchemeSQLite:
		l, err := sqlite.OpenLedger(ctx, addr, access)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: %w", addr, err)
		}
		return l, nil
	case address.SchemePostgres:
		l, err := postgres.OpenLedger(ctx, addr, access)
		if err != nil {
			// The ledger's errors name the server, never the password;
			// Redact masks it in whatever the driver quoted.
			return nil, &redactedError{fmt.Sprintf("ledger %s: %s", addr, address.Redact(err.Error())), err}
		}
		return l, nil
	}
	return nil, fmt.Errorf("ledger %s: %w: unknown kind %q; %s", addr, address.ErrInvalid, addr.Scheme, address.Forms)
}

// redactedError is a failure of the PostgreSQL ledger whose message has
// its passwords masked; it still matches the ledger's error with
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
