package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

func TestClassifyAddr(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want addrClass
	}{
		{"8.8.8.8", addrPublic},
		{"1.1.1.1", addrPublic},
		{"93.184.216.34", addrPublic},
		{"2606:4700:4700::1111", addrPublic},
		{"2002:0808:0808::1", addrPublic}, // 6to4 of 8.8.8.8
		{"::ffff:8.8.8.8", addrPublic},
		{"127.0.0.1", addrLoopback},
		{"127.255.0.9", addrLoopback},
		{"::1", addrLoopback},
		{"::ffff:127.0.0.1", addrLoopback},
		{"0.0.0.0", addrRefused},
		{"0.1.2.3", addrRefused},
		{"::", addrRefused},
		{"10.0.0.1", addrRefused},
		{"172.16.0.1", addrRefused},
		{"172.31.255.255", addrRefused},
		{"192.168.1.1", addrRefused},
		{"::ffff:10.0.0.1", addrRefused},
		{"::ffff:192.168.0.1", addrRefused},
		{"100.64.0.1", addrRefused},
		{"100.127.255.254", addrRefused},
		{"169.254.169.254", addrRefused},
		{"::ffff:169.254.169.254", addrRefused},
		{"224.0.0.1", addrRefused},
		{"239.255.255.250", addrRefused},
		{"255.255.255.255", addrRefused},
		{"240.0.0.1", addrRefused},
		{"192.0.0.8", addrRefused},
		{"192.0.2.1", addrRefused},
		{"198.18.0.1", addrRefused},
		{"198.51.100.7", addrRefused},
		{"203.0.113.9", addrRefused},
		{"fc00::1", addrRefused},
		{"fd12:3456::1", addrRefused},
		{"fe80::1", addrRefused},
		{"fe80::1%eth0", addrRefused},
		{"fec0::1", addrRefused},
		{"ff02::1", addrRefused},
		{"ff05::2", addrRefused},
		{"::127.0.0.1", addrRefused},      // IPv4-compatible (deprecated)
		{"64:ff9b::a00:1", addrRefused},   // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", addrRefused}, // NAT64 is not global unicast: refused whatever it embeds
		{"100::1", addrRefused},           // discard-only
		{"2001::1", addrRefused},          // Teredo
		{"2001:db8::1", addrRefused},
		{"3fff::1", addrRefused},
		{"2002:0a00:0001::1", addrRefused}, // 6to4 of 10.0.0.1
		{"2002:7f00:0001::1", addrRefused}, // 6to4 of 127.0.0.1
	} {
		got, why := classifyAddr(netip.MustParseAddr(tc.ip))
		if got != tc.want {
			t.Errorf("classifyAddr(%s) = %d (%s), want %d", tc.ip, got, why, tc.want)
		}
	}
}

func TestAllowed(t *testing.T) {
	pub, lo, priv := netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3")
	for _, tc := range []struct {
		name        string
		ip          netip.Addr
		flag, plain bool
		wantAllowed bool
	}{
		{"https public", pub, false, false, true},
		{"https public with the flag", pub, true, false, true},
		{"https loopback", lo, false, false, false},
		{"https loopback with the flag", lo, true, false, true},
		{"https private with the flag", priv, true, false, false},
		{"http public", pub, false, true, false},
		{"http public with the flag", pub, true, true, false},
		{"http loopback", lo, false, true, false},
		{"http loopback with the flag", lo, true, true, true},
		{"http private with the flag", priv, true, true, false},
	} {
		err := allowed(tc.ip, tc.flag, tc.plain)
		if (err == nil) != tc.wantAllowed {
			t.Errorf("%s: allowed = %v, want allowed %v", tc.name, err, tc.wantAllowed)
		}
	}
}

// TestPublicDialerRefusesLoopback dials a live loopback listener through
// the TLS-side dialer with the devnet flag off: the Control function
// refuses the resolved address before connecting, for an IP literal and for
// a name that resolves to loopback.
func TestPublicDialerRefusesLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	f := New(Config{})
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		conn, err := f.dialer(false).DialContext(context.Background(), "tcp", addr)
		if err == nil {
			conn.Close()
			t.Fatalf("dial %s: connected, want refused", addr)
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.Reason() != ReasonAddressNotPublic || fe.Transient() {
			t.Errorf("dial %s: %v, want a permanent %s", addr, err, ReasonAddressNotPublic)
		}
	}
	// With the flag, the same dialer connects.
	conn, err := New(Config{AllowLoopbackHTTP: true}).dialer(false).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with the flag: %v", err)
	}
	conn.Close()
}
