package testenv

import (
	"fmt"
	"net"
	"testing"
)

// FreePort's ports lie below the kernel's ephemeral range, where no outgoing connection
// takes them, and can be bound.
func TestFreePortIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	first := ephemeralStart()
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < 10000 || p >= first {
			t.Fatalf("port %d, want one in [10000, %d)", p, first)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("bind port %d: %v", p, err)
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 calls gave %d distinct ports", len(seen))
	}
}
