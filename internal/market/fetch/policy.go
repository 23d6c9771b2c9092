package fetch

import (
	"fmt"
	"net/netip"
	"syscall"
)

// nonPublic lists the IPv4 ranges that are never dialed, besides loopback
// (which the devnet flag may allow) and what netip classifies directly
// (private, link-local, multicast, unspecified). Sources: the IANA IPv4
// special-purpose address registry (RFC 6890 and successors).
var nonPublic4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),      // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),       // TEST-NET-1
	netip.MustParsePrefix("192.88.99.0/24"),     // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),      // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"),    // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),     // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, and the broadcast address
	netip.MustParsePrefix("255.255.255.255/32"), // limited broadcast (inside 240/4; named for clarity)
}

// IPv6: only global unicast (2000::/3) is dialed, minus these special
// ranges; 2002::/16 (6to4) is judged by the IPv4 address it embeds.
var (
	global6    = netip.MustParsePrefix("2000::/3")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	nonPublic6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments (Teredo, ORCHID, ...)
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("3fff::/20"),     // documentation (RFC 9637)
	}
)

// addrClass says whether an address may be dialed: public, loopback (the
// devnet flag decides) or refused with the reason.
type addrClass int

const (
	addrPublic addrClass = iota
	addrLoopback
	addrRefused
)

// classifyAddr judges one resolved IP address. IPv4-mapped IPv6 addresses
// (::ffff:a.b.c.d) are judged as the IPv4 address they carry; so is the
// IPv4 address inside a 6to4 address. A zone (fe80::1%eth0) is refused with
// its link-local address.
func classifyAddr(ip netip.Addr) (addrClass, string) {
	if !ip.IsValid() {
		return addrRefused, "invalid address"
	}
	ip = ip.Unmap()
	if ip.Zone() != "" {
		return addrRefused, "scoped (zoned) address"
	}
	switch {
	case ip.IsLoopback():
		return addrLoopback, "loopback"
	case ip.IsUnspecified():
		return addrRefused, "unspecified address"
	case ip.IsPrivate():
		return addrRefused, "private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return addrRefused, "link-local address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return addrRefused, "multicast address"
	}
	if ip.Is4() {
		for _, p := range nonPublic4 {
			if p.Contains(ip) {
				return addrRefused, "special-purpose address " + p.String()
			}
		}
		return addrPublic, ""
	}
	if !global6.Contains(ip) {
		return addrRefused, "not an IPv6 global unicast address"
	}
	for _, p := range nonPublic6 {
		if p.Contains(ip) {
			return addrRefused, "special-purpose address " + p.String()
		}
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		inner := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		if c, why := classifyAddr(inner); c != addrPublic {
			return addrRefused, "6to4 address embedding " + inner.String() + " (" + why + ")"
		}
	}
	return addrPublic, ""
}

// allowed decides whether a connection to ip may be made: public addresses
// always (loopback too when allowLoopback), and when plain is set (an
// http:// URL) loopback only, with the flag.
func allowed(ip netip.Addr, allowLoopback, plain bool) error {
	c, why := classifyAddr(ip)
	switch {
	case c == addrRefused:
		return fmt.Errorf("%s is not a public address (%s)", ip, why)
	case plain && !allowLoopback:
		return fmt.Errorf("plain http:// is refused (to %s); archives are fetched over https", ip)
	case plain && c != addrLoopback:
		return fmt.Errorf("plain http:// to %s is refused: the devnet flag allows it to loopback only", ip)
	case c == addrLoopback && !allowLoopback:
		return fmt.Errorf("%s is a loopback address", ip)
	}
	return nil
}

// control returns the net.Dialer Control function that enforces the policy
// on the address actually being dialed, after name resolution: it runs
// after the socket is created and before it connects, for every address a
// dial tries, so a name that resolves (or re-resolves) to an internal
// address is never connected to.
func control(allowLoopback, plain bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		switch network {
		case "tcp4", "tcp6":
		default:
			return &Error{reason: ReasonAddressNotPublic, msg: fmt.Sprintf("network %q is not dialed", network)}
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &Error{reason: ReasonAddressNotPublic, msg: fmt.Sprintf("dial address %q", address), err: err}
		}
		if err := allowed(ap.Addr(), allowLoopback, plain); err != nil {
			return &Error{reason: ReasonAddressNotPublic, msg: "dial refused", err: err}
		}
		return nil
	}
}
