// Package crosscheck compares internal/cron with github.com/robfig/cron/v3
// on random expressions and instants, and benchmarks the two side by side.
// It is a module of its own so that robfig/cron never enters tranche's
// go.mod; it has tests only. Run it from this directory:
//
//	go test ./...
//	go test -run '^$' -bench . -count 5
package crosscheck
