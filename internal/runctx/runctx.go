// Package runctx carries what a run knows of itself in the context its
// assets receive, between the root package, which sets it, and the
// packages that read it for users (ledger.TriggerFrom), without a name
// of the root's for it.
package runctx

import "context"

type triggerKey struct{}

// WithTrigger returns ctx carrying trigger, the run's.
func WithTrigger(ctx context.Context, trigger string) context.Context {
	return context.WithValue(ctx, triggerKey{}, trigger)
}

// Trigger returns the trigger ctx carries, or "".
func Trigger(ctx context.Context) string {
	t, _ := ctx.Value(triggerKey{}).(string)
	return t
}
