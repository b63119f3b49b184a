package bench

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// startThrottleProxy forwards TCP connections to target, each capped at
// rate bytes per second in each direction: how one connection to a cloud
// behaves, for servers in other processes, where the in-process
// store/faulty wrapper cannot be used. It returns the proxy's
// address; it stops when the benchmark ends.
func startThrottleProxy(b *testing.B, target string, rate int64) string {
	return startDelayProxy(b, target, rate, 0)
}

// startDelayProxy is startThrottleProxy that also delays every byte by
// rtt/2 in each direction, so that a request's answer starts rtt later
// than it would: the round trip to a cloud region, which this machine's
// kernel cannot add (no netem). New connections cost no extra round trip
// (the proxy accepts at once), which favours clients that open many.
func startDelayProxy(b *testing.B, target string, rate int64, rtt time.Duration) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				u, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				track(c, true)
				track(u, true)
				var wg sync.WaitGroup
				pipe := func(dst, src net.Conn) {
					if rtt > 0 {
						_, _ = delayedCopy(dst, src, rate, rtt/2)
					} else {
						_, _ = throttledCopy(dst, src, rate)
					}
					if tc, ok := dst.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
				}
				wg.Go(func() { pipe(u, c) })
				wg.Go(func() { pipe(c, u) })
				wg.Wait()
				c.Close()
				u.Close()
				track(c, false)
				track(u, false)
			}()
		}
	}()
	return ln.Addr().String()
}

// throttledCopy copies src to dst at most rate bytes per second, through a
// token bucket that lets an idle connection burst 256 KiB.
func throttledCopy(dst io.Writer, src io.Reader, rate int64) (int64, error) {
	const burst = 256 << 10
	buf := make([]byte, 32<<10)
	tokens, last := float64(burst), time.Now()
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			now := time.Now()
			tokens = min(burst, tokens+now.Sub(last).Seconds()*float64(rate))
			last = now
			tokens -= float64(n)
			if tokens < 0 {
				// pacing: the token bucket's rate limit
				time.Sleep(time.Duration(-tokens / float64(rate) * float64(time.Second)))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
	}
}

// delayedCopy copies src to dst like throttledCopy, each read's bytes
// written no earlier than delay after they arrived: a line of fixed
// latency in front of the rate cap.
func delayedCopy(dst io.Writer, src io.Reader, rate int64, delay time.Duration) (int64, error) {
	type piece struct {
		b   []byte
		at  time.Time
		err error
	}
	line := make(chan piece, 256)
	go func() {
		defer close(line)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				line <- piece{b: buf[:n], at: time.Now()}
			}
			if err != nil {
				if err != io.EOF {
					line <- piece{err: err}
				}
				return
			}
		}
	}()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var total int64
	var werr error
	go func() {
		defer close(done)
		total, werr = throttledCopy(dst, pr, rate)
		pr.CloseWithError(werr)
	}()
	for p := range line {
		if p.err != nil {
			pw.CloseWithError(p.err)
			<-done
			return total, p.err
		}
		time.Sleep(time.Until(p.at.Add(delay))) // pacing: the delay line's latency
		if _, err := pw.Write(p.b); err != nil {
			go func() {
				for range line { // let the reader finish
				}
			}()
			break
		}
	}
	pw.Close()
	<-done
	return total, werr
}
