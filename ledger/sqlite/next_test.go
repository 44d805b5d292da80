package sqlite_test

import (
	"testing"

	"github.com/tranche-dev/tranche/internal/schematest"
)

// TestClaimNextConcurrent checks schematest.CheckClaimNextConcurrent:
// eight goroutines share one ledger, and so its one writing connection.
func TestClaimNextConcurrent(t *testing.T) {
	schematest.CheckClaimNextConcurrent(t, openTemp(t, nil), 8)
}

// TestRelease checks schematest.CheckRelease.
func TestRelease(t *testing.T) { schematest.CheckRelease(t, subject) }
