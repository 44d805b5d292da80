package tranche

// RunWithID is Runner.run, for tests that need a known run id.
var RunWithID = (*Runner).run
