package sandbox

import (
	"fmt"
	"strconv"
)

// NetNSPath is the session's network namespace as the host sees it.
func (s *Session) NetNSPath() string { return fmt.Sprintf("/proc/%d/ns/net", s.Pid()) }

// Network is how the session reaches the network.
func (s *Session) Network() Network { return s.cfg.Network }

// Expose makes a port the agent listens on reachable from the host while the session
// runs (a lease taken after the start, through `corral ctl lease`). In a private
// network it is forwarded to a free host port; in host networking the agent's port is
// already the host's and is returned as it is.
func (s *Session) Expose(inside int) (Endpoint, error) {
	if inside < 1 || inside > 65535 {
		return Endpoint{}, fmt.Errorf("session %s: port %d: out of range 1-65535", s.cfg.ID, inside)
	}
	if s.cfg.Network != NetPrivate {
		return Endpoint{Inside: inside, Host: "127.0.0.1:" + strconv.Itoa(inside)}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return Endpoint{}, fmt.Errorf("session %s: port %d: the session has ended", s.cfg.ID, inside)
	}
	if s.fwd == nil {
		fwd, err := NewPortForwarder(s.NetNSPath())
		if err != nil {
			return Endpoint{}, fmt.Errorf("session %s: %w", s.cfg.ID, err)
		}
		s.fwd = fwd
	}
	ep, err := s.fwd.Expose(inside, 0)
	if err != nil {
		return Endpoint{}, fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	return ep, nil
}

// Unexpose stops exposing a port Expose made reachable.
func (s *Session) Unexpose(inside int) error {
	if s.cfg.Network != NetPrivate {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fwd == nil {
		return fmt.Errorf("session %s: port %d: not exposed", s.cfg.ID, inside)
	}
	return s.fwd.Unexpose(inside)
}
