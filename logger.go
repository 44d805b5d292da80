package tranche

import (
	"context"
	"log/slog"
)

// The logger of a materialization: Materialization.Logger's records
// become KindLog events of the run.

// logHandler is the slog.Handler behind Materialization.Logger: each
// record becomes a KindLog event of the run.
type logHandler struct {
	m    *Materialization
	goas []groupOrAttrs
}

type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return h.m.run.hasHooks() }

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(groupOrAttrs{attrs: attrs})
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(groupOrAttrs{group: name})
}

func (h *logHandler) with(g groupOrAttrs) *logHandler {
	h2 := *h
	h2.goas = append(h.goas[:len(h.goas):len(h.goas)], g)
	return &h2
}

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = appendAttr(attrs, a)
		return true
	})
	for i := len(h.goas) - 1; i >= 0; i-- {
		g := h.goas[i]
		if g.group == "" {
			pre := make([]slog.Attr, 0, len(g.attrs)+len(attrs))
			for _, a := range g.attrs {
				pre = appendAttr(pre, a)
			}
			attrs = append(pre, attrs...)
		} else if len(attrs) > 0 {
			attrs = []slog.Attr{{Key: g.group, Value: slog.GroupValue(attrs...)}}
		}
	}
	m := h.m
	m.run.emit(&Event{
		Kind: KindLog, Time: r.Time, Asset: m.Asset(), Attempt: m.attempt,
		Level: r.Level, Message: r.Message, Attrs: attrs, seq: int(m.logSeq.Add(1)),
	})
	return nil
}

// appendAttr appends a resolved, as slog.Handler asks: LogValuers
// resolved, empty attributes dropped, groups without a key inlined and
// empty groups dropped.
func appendAttr(attrs []slog.Attr, a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return attrs
	}
	if a.Value.Kind() != slog.KindGroup {
		return append(attrs, a)
	}
	var sub []slog.Attr
	for _, g := range a.Value.Group() {
		sub = appendAttr(sub, g)
	}
	switch {
	case len(sub) == 0:
		return attrs
	case a.Key == "":
		return append(attrs, sub...)
	}
	return append(attrs, slog.Attr{Key: a.Key, Value: slog.GroupValue(sub...)})
}
