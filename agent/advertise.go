package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/ironic-go/ironic-agent/agent/ironic"
)

// setupTLS fixes the callback URL and, with automatic TLS against Ironic
// >= 1.68, makes the self-signed certificate. Both are decided once, before
// the first heartbeat: Ironic rejects a changed callback URL or CA.
func (a *Agent) setupTLS(ctx context.Context, v ironic.Version) (*tls.Config, error) {
	host := a.cfg.AdvertiseHost
	if host == "" && !a.cfg.Standalone {
		h, err := a.findAdvertiseAddress(ctx)
		if err != nil {
			return nil, err
		}
		host = h
	}
	if host == "" {
		host = "127.0.0.1"
	}
	proto := a.cfg.AdvertiseProtocol
	var tlsCfg *tls.Config
	switch {
	case a.cfg.ListenTLS:
		pair, err := tls.LoadX509KeyPair(a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("listen_tls: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}}
		proto = "https"
	case a.cfg.EnableAutoTLS && !a.cfg.Standalone && v.AtLeast(ironic.VerifyCAMinor):
		ip := net.ParseIP(host)
		if ip == nil {
			ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
			if err != nil || len(ips) == 0 {
				if err == nil {
					err = errors.New("the resolver returned no address")
				}
				return nil, fmt.Errorf("auto TLS: advertised host %q has no IP address: %w", host, err)
			}
			ip = ips[0]
		}
		a.mu.Lock()
		uuid := a.nodeUUID
		a.mu.Unlock()
		cert, err := a.autoTLSCertificate(uuid, ip)
		if err != nil {
			return nil, err
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert.Cert}}
		proto = "https"
		a.mu.Lock()
		a.verifyCA = string(cert.CertPEM)
		a.mu.Unlock()
	}
	u := url.URL{Scheme: proto, Host: net.JoinHostPort(host, strconv.Itoa(a.cfg.AdvertisePort))}
	a.mu.Lock()
	a.callbackURL = u.String()
	a.mu.Unlock()
	if tlsCfg != nil {
		// Served with IPA's policy: TLS 1.2+ with AEAD suites, or 1.3
		// only; Ironic >= 2025.x conductors ask for 1.3.
		a.TLSPolicy().Apply(tlsCfg)
	}
	return tlsCfg, nil
}

// findAdvertiseAddress finds the local address of the route to Ironic (what
// IPA gets from "ip route get"): a UDP "connection" picks the route and
// source address without sending anything. With network_interface set, that
// interface's IPv4 address is used instead.
func (a *Agent) findAdvertiseAddress(ctx context.Context) (string, error) {
	attempts := max(a.cfg.IPLookupAttempts, 1)
	var lastErr error
	for i := 0; i < attempts; i++ {
		if a.cfg.NetworkInterface != "" {
			ip, err := interfaceIPv4(a.cfg.NetworkInterface)
			if err == nil {
				return ip, nil
			}
			lastErr = err
		} else {
			for _, raw := range a.cfg.APIURLs {
				ip, err := routeSource(ctx, raw)
				if err == nil {
					return ip, nil
				}
				lastErr = err
			}
		}
		if i+1 < attempts {
			if err := a.sleep(ctx, a.cfg.IPLookupSleep); err != nil {
				return "", err
			}
		}
	}
	return "", fmt.Errorf("cannot find the address to advertise (set ipa-advertise-host): %w", lastErr)
}

func routeSource(ctx context.Context, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", u.Host, err)
	}
	defer c.Close()
	ip := c.LocalAddr().(*net.UDPAddr).IP
	if ip.IsLinkLocalUnicast() {
		return "", fmt.Errorf("route to %s: only a link-local source address %s", u.Host, ip)
	}
	return ip.String(), nil
}

func interfaceIPv4(name string) (string, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("network_interface %s: %w", name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return "", fmt.Errorf("network_interface %s: %w", name, err)
	}
	for _, ad := range addrs {
		if n, ok := ad.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("network_interface %s has no IPv4 address", name)
}
