package tranchecli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/user"

	"github.com/tranche-dev/tranche/ledger"
)

func pauseFlags(c *call, fs *flag.FlagSet) {
	fs.StringVar(&c.opt.note, "note", "", "why, recorded with the pause and shown by status and the pages")
	fs.StringVar(&c.opt.by, "by", defaultBy(), "who, recorded with the pause")
}

// defaultBy names the operator: user@host.
func defaultBy() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	return name
}

// pauseOf returns the ledger, the DAG the command names (its name or
// identity) and its schedule's pause.
func (c *call) pauseOf(ctx context.Context) (ledger.Ledger, dagRef, ledger.SchedulePause, error) {
	l, err := c.writer(ctx)
	if err != nil {
		return nil, dagRef{}, ledger.SchedulePause{}, err
	}
	d, ok, err := c.findDAG(ctx, l, c.args[0])
	switch {
	case err != nil:
		return nil, dagRef{}, ledger.SchedulePause{}, err
	case !ok:
		return nil, dagRef{}, ledger.SchedulePause{}, &unknownError{fmt.Sprintf("no DAG %q: give a DAG's name or identity, as '%s ls' lists them", c.args[0], c.name)}
	}
	before, err := l.SchedulePause(ctx, d.id)
	return l, d, before, err
}

// runPause pauses the schedule of a DAG, by its name or identity: every
// scheduler of it on the ledger starts no slot until it is unpaused.
func runPause(ctx context.Context, c *call) error {
	l, d, before, err := c.pauseOf(ctx)
	if err != nil {
		return err
	}
	if before.Paused {
		fmt.Fprintf(c.stdout, "The schedule of DAG %s was paused already, by %s at %s: nothing was changed. '%s unpause %s' resumes it.\n",
			d.label(), before.By, stamp(before.Since), c.name, c.args[0])
		return exitErr(exitNothing)
	}
	p, err := l.SetSchedulePause(ctx, d.id, ledger.SchedulePause{Paused: true, By: c.opt.by, Note: c.opt.note})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Paused the schedule of DAG %s at %s: its schedulers start no slot until '%s unpause %s'; slots running finish, and those that come due meanwhile are missed, caught up by the catch-up rules once resumed.\n",
		d.label(), stamp(p.Since), c.name, c.args[0])
	return nil
}

// runUnpause resumes the paused schedule of a DAG, by its name or
// identity.
func runUnpause(ctx context.Context, c *call) error {
	l, d, before, err := c.pauseOf(ctx)
	if err != nil {
		return err
	}
	if !before.Paused {
		fmt.Fprintf(c.stdout, "The schedule of DAG %s is not paused: nothing was changed.\n", d.label())
		return exitErr(exitNothing)
	}
	p, err := l.SetSchedulePause(ctx, d.id, ledger.SchedulePause{By: c.opt.by, Note: c.opt.note})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Resumed the schedule of DAG %s at %s, paused since %s by %s: its schedulers catch up what came due meanwhile within their catch-up window, and report the rest missed.\n",
		d.label(), stamp(p.Since), stamp(before.Since), before.By)
	return nil
}
