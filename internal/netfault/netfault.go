// Package netfault is a loopback TCP proxy for tests that breaks the
// network between clients and a server the ways networks break: it
// black-holes traffic in one direction or both, drops the server's
// replies while the requests get through, delays traffic, and resets
// every connection, for a chosen time or until healed, by hand or at
// random from a seeded source.
//
// A test points its client at [Proxy.Addr] in place of the server's
// address. Each connection accepted is forwarded to the target over a
// connection of its own, in both directions, by reads of at most 32 KiB
// ("chunks"), and each fault applies to chunks as they are about to be
// forwarded:
//
//   - A cut ([Proxy.Cut]) holds them: the proxy stops forwarding and
//     then stops reading, so that the sender's writes block once the
//     kernel's buffers fill, as over a network that went silent; nothing
//     is reset, and the connections stay open. Healed, the proxy
//     forwards what it held, in order, as TCP retransmits what a
//     partition shorter than its retransmission timeout held back: the
//     server gets the requests sent during the cut, late.
//   - A drop ([Proxy.Drop]) discards them. A byte stream that lost bytes
//     cannot go on, so a connection that lost any is reset when the drop
//     heals, as TCP ends a connection whose retransmissions timed out;
//     the others go on. Dropping the replies (Down) alone lets a request
//     reach the server, which acts on it (commits), while its client
//     never learns it did.
//   - A delay ([Proxy.Delay]) forwards each chunk a while after it was
//     read.
//   - A reset ([Proxy.Reset]) ends every open connection at once, with
//     an RST to the client and to the server.
//
// New connections are accepted and forwarded under the same faults: a
// client connecting across a cut gets no answer to what it sends.
package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche/internal/wait"
)

// Dir is a direction of traffic, or both.
type Dir uint8

const (
	// Up is from the client to the server: requests.
	Up Dir = 1 << iota
	// Down is from the server to the client: replies.
	Down
	// Both is Up and Down.
	Both = Up | Down
)

func (d Dir) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Dir(%d)", d)
}

// Kind is a kind of fault.
type Kind uint8

const (
	// KindCut black-holes Fault.Dir (see Proxy.Cut).
	KindCut Kind = iota + 1
	// KindDrop discards Fault.Dir (see Proxy.Drop).
	KindDrop
	// KindDelay delays Fault.Dir by Fault.Delay (see Proxy.Delay).
	KindDelay
	// KindReset resets every connection (see Proxy.Reset); it has no
	// duration.
	KindReset
)

func (k Kind) String() string {
	switch k {
	case KindCut:
		return "cut"
	case KindDrop:
		return "drop"
	case KindDelay:
		return "delay"
	case KindReset:
		return "reset"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Fault is one fault to apply ([Proxy.Apply]).
type Fault struct {
	Kind  Kind
	Dir   Dir           // for KindCut, KindDrop and KindDelay
	Delay time.Duration // for KindDelay
	// For is how long the fault lasts before it heals itself; 0 means
	// until Heal. A fault applied meanwhile takes its place, and is not
	// healed by the earlier one's end.
	For time.Duration
}

func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(f.Kind.String())
	if f.Kind != KindReset {
		b.WriteString(" " + f.Dir.String())
	}
	if f.Kind == KindDelay {
		fmt.Fprintf(&b, " by %v", f.Delay)
	}
	if f.For > 0 {
		fmt.Fprintf(&b, " for %v", f.For)
	}
	return b.String()
}

// Stats counts what a proxy did, since it started.
type Stats struct {
	Accepted int // connections accepted
	Resets   int // connections reset, by Reset or by the heal of a drop
	// Forwarded, Late and Dropped are bytes by direction: forwarded,
	// forwarded after a cut that had held them healed (a subset of
	// Forwarded), and discarded by a drop.
	Forwarded, Late, Dropped Bytes
	// Held is the bytes a cut holds now, read and not yet forwarded.
	Held Bytes
}

// Bytes counts bytes by direction.
type Bytes struct{ Up, Down int64 }

func (b *Bytes) add(d Dir, n int) {
	if d == Up {
		b.Up += int64(n)
	} else {
		b.Down += int64(n)
	}
}

// Total returns the bytes of both directions.
func (b Bytes) Total() int64 { return b.Up + b.Down }

// Proxy forwards the connections it accepts on a loopback address to a
// target, under the faults applied to it. Its methods may be called from
// any goroutine.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond // broadcast when the faults change, a link ends, or the proxy closes
	cut    Dir
	drop   Dir
	delay  Dir
	by     time.Duration
	gen    uint64 // counts faults applied and heals, so that a timed fault heals only itself
	links  map[*link]struct{}
	stats  Stats
	closed bool

	wg sync.WaitGroup
}

// Listen starts a proxy to target (host:port) on a free port of
// 127.0.0.1.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netfault: %w", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address clients connect to, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		l.reset()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// Cut black-holes traffic in dir (see the package doc) for d, or until
// Heal when d is 0.
func (p *Proxy) Cut(dir Dir, d time.Duration) { p.Apply(Fault{Kind: KindCut, Dir: dir, For: d}) }

// Drop discards traffic in dir (see the package doc) for d, or until
// Heal when d is 0; the heal resets the connections that lost bytes.
func (p *Proxy) Drop(dir Dir, d time.Duration) { p.Apply(Fault{Kind: KindDrop, Dir: dir, For: d}) }

// Delay holds each chunk of traffic in dir until by after it was read,
// for d, or until Heal when d is 0.
func (p *Proxy) Delay(dir Dir, by, d time.Duration) {
	p.Apply(Fault{Kind: KindDelay, Dir: dir, Delay: by, For: d})
}

// Reset resets every open connection, both of its sides, and returns
// how many.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resetLocked(func(*link) bool { return true })
}

// Heal ends the faults applied: what a cut held is forwarded, a delay
// ends, and the connections that a drop took bytes from are reset.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healLocked()
}

// Apply applies f in place of the faults applied before, which heal
// first. A reset heals nothing: the faults before it go on.
func (p *Proxy) Apply(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.Kind == KindReset {
		p.resetLocked(func(*link) bool { return true })
		return
	}
	p.healLocked()
	switch f.Kind {
	case KindCut:
		p.cut = f.Dir
	case KindDrop:
		p.drop = f.Dir
	case KindDelay:
		p.delay, p.by = f.Dir, f.Delay
	default:
		panic(fmt.Sprintf("netfault: Apply of %v", f.Kind))
	}
	if f.For > 0 {
		gen := p.gen
		time.AfterFunc(f.For, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.gen == gen {
				p.healLocked()
			}
		})
	}
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Open returns how many connections are open.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

func (p *Proxy) healLocked() {
	p.gen++
	p.cut, p.drop, p.delay, p.by = 0, 0, 0, 0
	p.resetLocked(func(l *link) bool { return l.damaged })
	p.cond.Broadcast()
}

func (p *Proxy) resetLocked(which func(*link) bool) int {
	n := 0
	for l := range p.links {
		if !l.ended && which(l) {
			l.reset()
			n++
		}
	}
	p.stats.Resets += n
	p.cond.Broadcast()
	return n
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve forwards one accepted connection.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.reset()
		return
	}
	p.links[l] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()

	var halves sync.WaitGroup
	halves.Go(func() { p.forward(l, Up, client, server) })
	halves.Go(func() { p.forward(l, Down, server, client) })
	halves.Wait()
	p.mu.Lock()
	delete(p.links, l)
	l.end()
	p.mu.Unlock()
}

// link is a client's connection and the proxy's to the server for it.
type link struct {
	client, server net.Conn
	done           chan struct{} // closed when the link is reset or ends
	damaged        bool          // a drop took bytes from it: the next heal resets it
	ended          bool
}

// reset ends both connections with an RST. Called under the proxy's mu.
func (l *link) reset() {
	if l.ended {
		return
	}
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	l.end()
}

// end closes both connections. Called under the proxy's mu.
func (l *link) end() {
	if l.ended {
		return
	}
	l.ended = true
	l.client.Close()
	l.server.Close()
	close(l.done)
}

// chunk is a read, to forward.
type chunk struct {
	data []byte
	at   time.Time // when it was read
}

// forward copies src to dst in direction dir under the proxy's faults:
// a reader goroutine reads chunks into a short queue, which stops the
// reads when a cut holds it full, and this goroutine forwards them.
func (p *Proxy) forward(l *link, dir Dir, src, dst net.Conn) {
	queue := make(chan chunk, 4)
	var readErr error
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{buf[:n], time.Now()}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	for c := range queue {
		if !p.deliver(l, dir, dst, c) {
			p.mu.Lock()
			l.reset()
			p.mu.Unlock()
			for range queue {
			}
			return
		}
	}
	// The queue closed after readErr was set.
	if errors.Is(readErr, io.EOF) {
		// The sender closed its side: pass the end on, after what was
		// held before it.
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		return
	}
	// A reset or another failure of the sender's side: end the link,
	// as the loss of a connection shows at both ends.
	p.mu.Lock()
	l.reset()
	p.mu.Unlock()
}

// deliver forwards one chunk under the faults in force when it is due,
// and reports whether the link goes on.
func (p *Proxy) deliver(l *link, dir Dir, dst net.Conn, c chunk) bool {
	p.mu.Lock()
	held := false
	for p.cut&dir != 0 && !l.ended && !p.closed {
		if !held {
			held = true
			p.stats.Held.add(dir, len(c.data))
		}
		p.cond.Wait()
	}
	if held {
		p.stats.Held.add(dir, -len(c.data))
	}
	switch {
	case l.ended || p.closed:
		p.mu.Unlock()
		return false
	case p.drop&dir != 0:
		p.stats.Dropped.add(dir, len(c.data))
		l.damaged = true
		p.mu.Unlock()
		return true
	}
	var wait time.Duration
	if p.delay&dir != 0 {
		wait = time.Until(c.at.Add(p.by))
	}
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			return false
		}
	}
	if _, err := dst.Write(c.data); err != nil {
		return false
	}
	p.mu.Lock()
	p.stats.Forwarded.add(dir, len(c.data))
	if held {
		p.stats.Late.add(dir, len(c.data))
	}
	p.mu.Unlock()
	return true
}

// Chaos is a random schedule of faults for [Proxy.Chaos].
type Chaos struct {
	// Faults are the faults to choose from, each time with the same
	// chance; each one's For is its longest duration, and a fault lasts
	// from a tenth of it to all of it.
	Faults []Fault
	// Calm bounds the time between a fault's end and the next one's
	// start, which is drawn from [Calm/10, Calm].
	Calm time.Duration
	// Log, when not nil, is told each fault as it is applied.
	Log func(Fault)
}

// Chaos applies faults of c at random from r, one at a time, until ctx
// ends, then heals and returns the faults applied, in order. A test
// logs the seed of r, so that a failing schedule can be replayed.
func (p *Proxy) Chaos(ctx context.Context, r *rand.Rand, c Chaos) []Fault {
	var applied []Fault
	defer p.Heal()
	for {
		if wait.Sleep(ctx, between(r, c.Calm)) != nil {
			return applied
		}
		f := c.Faults[r.IntN(len(c.Faults))]
		long := f.For
		f.For = 0
		if f.Kind == KindDelay {
			f.Delay = between(r, f.Delay)
		}
		if c.Log != nil {
			c.Log(f)
		}
		p.Apply(f)
		applied = append(applied, f)
		if f.Kind == KindReset {
			continue
		}
		if wait.Sleep(ctx, between(r, long)) != nil {
			return applied
		}
		p.Heal()
	}
}

// between draws a duration from [d/10, d].
func between(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/10 + time.Duration(r.Int64N(int64(d-d/10)+1))
}
