package postgres_test

import (
	"testing"

	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/internal/sqldesttest"
	"github.com/tranche-dev/tranche/ledger/postgres"
)

// pgEnv is the destinations' test suite's database: a ledger in a fresh
// schema, destinations sharing it, and separate destinations on their
// own connections to the same schema.
func pgEnv(t *testing.T) *sqldesttest.Env {
	url := serverURL(t)
	schema := freshSchema(t, url)
	l, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	create := func(t *testing.T, d *postgres.Destination, err error) *sqldest.Destination {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if err := d.CreateTables(t.Context()); err != nil {
			t.Fatal(err)
		}
		return d.Destination
	}
	return &sqldesttest.Env{Ledger: l.Ledger, DB: admin(t, withParams(t, url, "search_path", schema)),
		Shared: func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination {
			d, err := postgres.NewDestination(t.Context(), l, tables...)
			return create(t, d, err)
		},
		Separate: func(t *testing.T, tables ...sqldest.Table) *sqldest.Destination {
			d, err := postgres.OpenDestination(t.Context(), url, &postgres.Options{Schema: schema}, tables...)
			return create(t, d, err)
		},
	}
}

func TestDestination(t *testing.T) {
	sqldesttest.Run(t, pgEnv)
}

// The PostgreSQL destination keeps the destination contract
// (destination/destinationtest), as every shipped destination does.
func TestDestinationContract(t *testing.T) {
	sqldesttest.Contract(t, pgEnv)
}
