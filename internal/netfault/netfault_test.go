package netfault

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echo is a TCP echo server on loopback that counts what it received, so
// that a test sees which requests reached it.
type echo struct {
	ln       net.Listener
	received atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	errs     []error // the reads that failed other than at EOF
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						if !errors.Is(err, io.EOF) {
							e.mu.Lock()
							e.errs = append(e.errs, err)
							e.mu.Unlock()
						}
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echo) failedReads() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// proxyTo starts a proxy to e, closed when the test ends.
func proxyTo(t *testing.T, e *echo) *Proxy {
	t.Helper()
	p, err := Listen(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within d.
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	expect(t, c, msg, d)
}

// expect reads msg within d.
func expect(t *testing.T, c net.Conn, msg string, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q back: %v (got %q)", msg, err, got)
	}
	if string(got) != msg {
		t.Fatalf("read %q; want %q", got, msg)
	}
}

// silent checks that nothing arrives on c for d and that c stays open.
func silent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, err := c.Read(b[:])
	if ne, ok := err.(net.Error); n != 0 || !ok || !ne.Timeout() {
		t.Fatalf("read %d bytes, %v; want nothing and the connection open", n, err)
	}
}

// awaitReceived waits until the echo server has received n bytes.
func awaitReceived(t *testing.T, e *echo, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); e.received.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server received %d bytes; want %d", e.received.Load(), n)
		}
	}
}

// awaitStats waits until the proxy's stats satisfy ok, at most 5 s, and
// returns them.
func awaitStats(t *testing.T, p *Proxy, ok func(Stats) bool) Stats {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if s := p.Stats(); ok(s) || time.Now().After(deadline) {
			return s
		}
	}
}

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func TestForward(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	c := dial(t, p)
	roundTrip(t, c, "hello", time.Second)
	// More than the proxy reads at once, in both directions at once.
	payload := make([]byte, 4<<20)
	fill(rand.New(rand.NewPCG(1, 2)), payload)
	go c.Write(payload)
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the payload came back changed")
	}
	want := int64(len(payload) + 5)
	if s := awaitStats(t, p, func(s Stats) bool { return s.Forwarded.Down >= want }); s.Accepted != 1 || s.Forwarded.Up != want || s.Forwarded.Down != want || s.Late != (Bytes{}) {
		t.Errorf("stats %+v; want one connection, every byte forwarded once each way, none late", s)
	}
}

// TestCut cuts each direction: nothing crosses, the connections stay
// open, new ones get no answer, and once healed what was held arrives in
// order.
func TestCut(t *testing.T) {
	for _, dir := range []Dir{Up, Down, Both} {
		t.Run(dir.String(), func(t *testing.T) {
			e := newEcho(t)
			p := proxyTo(t, e)
			c := dial(t, p)
			roundTrip(t, c, "before", time.Second)
			p.Cut(dir, 0)
			if _, err := c.Write([]byte("during")); err != nil {
				t.Fatal(err)
			}
			late := dial(t, p)
			if _, err := late.Write([]byte("new")); err != nil {
				t.Fatal(err)
			}
			held := int64(len("during") + len("new"))
			// Held where the cut stops them: the requests, or, across a
			// cut of the replies alone, the replies, once the server has
			// answered.
			for deadline := time.Now().Add(5 * time.Second); p.Stats().Held.Total() != held; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the cut holds %+v; want %d bytes", p.Stats().Held, held)
				}
			}
			silent(t, c, 300*time.Millisecond)
			silent(t, late, 10*time.Millisecond)
			want := int64(len("before"))
			if dir == Down {
				want += held
			}
			if got := e.received.Load(); got != want {
				t.Errorf("the server received %d bytes during the cut; want %d", got, want)
			}
			p.Heal()
			expect(t, c, "during", 2*time.Second)
			expect(t, late, "new", 2*time.Second)
			roundTrip(t, c, "after", time.Second)
			// The proxy counts a chunk once its write returned, which
			// may be after the client read it.
			s := awaitStats(t, p, func(s Stats) bool { return s.Late.Total() >= held })
			if want := (Bytes{Up: held}); dir != Down && s.Late != want {
				t.Errorf("late %+v; want %+v: the requests held", s.Late, want)
			}
			if want := (Bytes{Down: held}); dir == Down && s.Late != want {
				t.Errorf("late %+v; want %+v: the replies held", s.Late, want)
			}
			if s.Resets != 0 || s.Dropped != (Bytes{}) || s.Held != (Bytes{}) {
				t.Errorf("stats %+v; want nothing reset, dropped or still held", s)
			}
		})
	}
}

// TestCutHolds checks that a cut stops reading, so that a sender blocks
// as over a silent network rather than the proxy buffering without
// bound, and that every byte then arrives once, in order.
func TestCutHolds(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	c := dial(t, p)
	p.Cut(Up, 0)
	payload := make([]byte, 16<<20)
	fill(rand.New(rand.NewPCG(3, 4)), payload)
	c.SetWriteDeadline(time.Now().Add(time.Second))
	n, err := c.Write(payload)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() || n == len(payload) {
		t.Fatalf("wrote %d of %d bytes across the cut, %v; want the write to block", n, len(payload), err)
	}
	if got := e.received.Load(); got != 0 {
		t.Fatalf("the server received %d bytes across the cut", got)
	}
	t.Logf("%d MiB written before the write blocked", n>>20)
	c.SetWriteDeadline(time.Time{})
	p.Heal()
	go c.Write(payload[n:])
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the payload came back changed")
	}
}

// TestDropReplies drops the replies: the requests reach the server,
// their replies never come, and the heal resets the connections that
// lost a reply, not the others.
func TestDropReplies(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	busy, idle := dial(t, p), dial(t, p)
	roundTrip(t, busy, "a", time.Second)
	roundTrip(t, idle, "b", time.Second)
	p.Drop(Down, 0)
	if _, err := busy.Write([]byte("commit")); err != nil {
		t.Fatal(err)
	}
	awaitReceived(t, e, int64(len("a")+len("b")+len("commit")))
	silent(t, busy, 300*time.Millisecond)
	p.Heal()
	busy.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [16]byte
	if n, err := busy.Read(b[:]); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("after the heal, the connection that lost a reply read %q, %v; want it reset", b[:n], err)
	}
	roundTrip(t, idle, "still", time.Second)
	roundTrip(t, dial(t, p), "new", time.Second)
	s := p.Stats()
	if s.Dropped != (Bytes{Down: int64(len("commit"))}) || s.Resets != 1 {
		t.Errorf("stats %+v; want the reply's bytes dropped and one connection reset", s)
	}
}

func TestDelay(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	c := dial(t, p)
	p.Delay(Both, 100*time.Millisecond, 600*time.Millisecond)
	start := time.Now()
	roundTrip(t, c, "slow", 2*time.Second)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a round trip took %v; want at least 200ms, delayed each way", took)
	}
	time.Sleep(600 * time.Millisecond) // the delay heals itself
	start = time.Now()
	roundTrip(t, c, "fast", time.Second)
	if took := time.Since(start); took >= 100*time.Millisecond {
		t.Errorf("a round trip took %v once the delay ended", took)
	}
}

func TestReset(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	a, b := dial(t, p), dial(t, p)
	roundTrip(t, a, "a", time.Second)
	roundTrip(t, b, "b", time.Second)
	if n := p.Reset(); n != 2 {
		t.Errorf("Reset reset %d connections; want 2", n)
	}
	for _, c := range []net.Conn{a, b} {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var buf [1]byte
		if _, err := c.Read(buf[:]); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a client read %v; want its connection reset", err)
		}
	}
	// The server's side was reset too.
	for deadline := time.Now().Add(2 * time.Second); len(e.failedReads()) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server saw %v; want both connections reset", e.failedReads())
		}
	}
	for _, err := range e.failedReads() {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the server read %v; want its connection reset", err)
		}
	}
	roundTrip(t, dial(t, p), "new", time.Second)
	for deadline := time.Now().Add(2 * time.Second); p.Open() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open; want the new one alone", p.Open())
		}
	}
}

// TestTimedFault checks that a fault of a chosen time heals itself, and
// that a fault applied meanwhile outlives it.
func TestTimedFault(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	c := dial(t, p)
	p.Cut(Both, 100*time.Millisecond)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "x", 2*time.Second) // healed by itself
	p.Cut(Both, 100*time.Millisecond)
	p.Cut(Up, 0) // in its place, until Heal
	if _, err := c.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	silent(t, c, 400*time.Millisecond)
	p.Heal()
	expect(t, c, "y", 2*time.Second)
}

// TestChaos runs random faults under traffic on several connections:
// whatever a connection receives is a prefix of what it sent, in order,
// however it ended; once the chaos ends and heals, the proxy forwards as
// before. The same seed draws the same faults. NETFAULT_SEED replays a
// run.
func TestChaos(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NETFAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("NETFAULT_SEED=%d", seed)
	c := Chaos{
		Faults: []Fault{
			{Kind: KindCut, Dir: Both, For: 100 * time.Millisecond},
			{Kind: KindCut, Dir: Up, For: 100 * time.Millisecond},
			{Kind: KindDrop, Dir: Down, For: 50 * time.Millisecond},
			{Kind: KindDelay, Dir: Both, Delay: 20 * time.Millisecond, For: 100 * time.Millisecond},
			{Kind: KindReset},
		},
		Calm: 50 * time.Millisecond,
	}
	e := newEcho(t)
	p := proxyTo(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var exchanged atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for ctx.Err() == nil {
				exchanged.Add(converse(t, ctx, p, r))
			}
		})
	}
	var log []Fault
	c.Log = func(f Fault) { log = append(log, f) }
	applied := p.Chaos(ctx, rand.New(rand.NewPCG(seed, 0)), c)
	wg.Wait()
	if len(applied) < 5 || len(log) != len(applied) {
		t.Fatalf("%d faults applied, %d logged; want several, each logged", len(applied), len(log))
	}
	// Drawn again from the seed, without the proxy's timing: the same.
	r := rand.New(rand.NewPCG(seed, 0))
	for i, f := range applied {
		between(r, c.Calm)
		g := c.Faults[r.IntN(len(c.Faults))]
		long := g.For
		g.For = 0
		if g.Kind == KindDelay {
			g.Delay = between(r, g.Delay)
		}
		if g != f {
			t.Fatalf("fault %d: %v from the seed; the chaos applied %v", i, g, f)
		}
		if g.Kind != KindReset {
			between(r, long)
		}
	}
	s := p.Stats()
	t.Logf("%d faults: %v; %d bytes echoed intact; stats %+v", len(applied), applied, exchanged.Load(), s)
	roundTrip(t, dial(t, p), "after the chaos", time.Second)
}

// converse sends random messages on a new connection until it fails or
// ctx ends, checking that what comes back is what was sent, in order, and
// returns how many bytes came back.
func converse(t *testing.T, ctx context.Context, p *Proxy, r *rand.Rand) int64 {
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Error(err)
		return 0
	}
	defer c.Close()
	var sent, got bytes.Buffer
	for ctx.Err() == nil {
		msg := make([]byte, 1+r.IntN(4096))
		fill(r, msg)
		sent.Write(msg)
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write(msg); err != nil {
			break
		}
		buf := make([]byte, len(msg))
		n, err := io.ReadFull(c, buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !bytes.HasPrefix(sent.Bytes(), got.Bytes()) {
		t.Errorf("a connection received %d bytes that are not a prefix of the %d it sent", got.Len(), sent.Len())
	}
	return int64(got.Len())
}

func TestClose(t *testing.T) {
	e := newEcho(t)
	p := proxyTo(t, e)
	c := dial(t, p)
	roundTrip(t, c, "x", time.Second)
	p.Cut(Both, 0) // a forwarder waiting on a cut must not hold Close up
	if _, err := c.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Error("a connection read after Close; want it ended")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the proxy accepted a connection after Close")
	}
}
