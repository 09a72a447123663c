package bench

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// delayedDSN returns dsn pointing at a TCP proxy that forwards to dsn's server and holds
// every chunk, each way, for delay before passing it on (order kept): a database that far
// away. The proxy stops at the end of the test.
func delayedDSN(tb testing.TB, dsn string, delay time.Duration) string {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); delayedCopy(up, c, delay) }()
			go func() { defer wg.Done(); delayedCopy(c, up, delay) }()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

// delayedCopy copies src to dst, each chunk delay after it was read.
func delayedCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	for range q { // drain so the reader can finish
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		_ = dst.(io.Closer).Close()
	}
}
