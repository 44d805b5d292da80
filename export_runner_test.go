package tranche

// RunWithID is Runner.run, for tests that need a known run id, attempt
// or backfill.
var RunWithID = (*Runner).run
