package postgres_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/tranche-dev/tranche/ledger/postgres"
)

// TestCloseAfterFailedOpen is the first lines a user copies, with the
// Close deferred before the error is checked: the failed Open's error is
// what the caller sees, not a nil-pointer panic. It needs no server: the
// port is one nothing listens on.
func TestCloseAfterFailedOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("postgres://tranche@127.0.0.1:%d/warehouse?sslmode=disable&connect_timeout=5", port)
	open := func() (err error) {
		lg, err := postgres.Open(t.Context(), url, nil)
		//lint:ignore SA5001 the trap the test checks: Close deferred before the error is
		defer lg.Close()
		return err
	}
	if err := open(); !errors.Is(err, postgres.ErrConnect) {
		t.Fatalf("Open of an unreachable server = %v; want an error matching postgres.ErrConnect", err)
	}
	var nilLedger *postgres.Ledger
	if err := nilLedger.Close(); err != nil {
		t.Errorf("Close of a nil ledger = %v; want nil", err)
	}
}
