// Package cronspec hands a schedule granularity's parsed form to the
// packages of this module that read more of it than its text: a DAG's
// identity (package backfill) and the matching of attempts to slots
// (internal/slotmatch). The root package parses a schedule once, in
// ParseCron, and keeps the result in the TimeGranularity; reading it
// back from String would parse it again and keep two readings of one
// text in step by hand.
package cronspec

import (
	_ "unsafe" // for go:linkname

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/internal/cron"
)

// Of returns the parsed form of schedule g, or nil when g is not a
// schedule (see tranche.TimeGranularity.IsSchedule).
//
// Of has no body here: the root package's cronSpecOf is its code, linked
// by the root's go:linkname directive, so that the root's page gains no
// name and no package-level state carries the accessor. The empty
// cronspec.s lets the compiler accept a function without a body.
//
//go:linkname Of
func Of(g tranche.TimeGranularity) *cron.Spec
