package supervisor

// ctl lease and endpoint: ports and named services, reachable across sandboxes.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"corral/sandbox"
)

// ctlLease claims a port the caller listens on, optionally as a named service other
// sessions find with `ctl endpoint`. A name is held by one session at a time.
func (s *Supervisor) ctlLease(session string, port int, name string) (BoardLease, error) {
	if port < 1 || port > 65535 {
		return BoardLease{}, fmt.Errorf("lease port %d: out of range 1-65535", port)
	}
	if name != "" && !leaseNamePattern(name) {
		return BoardLease{}, fmt.Errorf("lease name %q: use letters, digits, '.', '_' or '-'", name)
	}
	var out BoardLease
	err := s.onSession(session, func(ls *liveSession, _ *Task) error {
		held := s.heldLeases()
		var replace *Lease
		for i, l := range held {
			switch {
			case name != "" && l.Name == name && l.Session != session:
				return fmt.Errorf("lease name %q: held by session %s (task %s)", name, l.Session, l.Task)
			case l.Session == session && l.Port == port:
				if l.Name == name {
					out = BoardLease{Task: l.Task, Session: session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint}
					return nil // already held as asked
				}
				replace = &held[i]
			case l.Session == session && name != "" && l.Name == name:
				return fmt.Errorf("lease name %q: already names this session's port %d (drop it first)", name, l.Port)
			}
		}
		endpoint := ""
		if replace != nil {
			endpoint = replace.Endpoint // the port is exposed already; it gains a name
		} else {
			ep, err := ls.sb.Expose(port)
			if err != nil {
				return fmt.Errorf("lease port %d: %w", port, err)
			}
			endpoint = ep.Host
			if ls.exposed == nil {
				ls.exposed = map[int]bool{}
			}
			ls.exposed[port] = true
		}
		l := Lease{Session: session, Task: ls.rec.Task, Name: name, Port: port, Endpoint: endpoint, Start: s.now()}
		_, err := s.commit(func(tx Tx) error {
			if replace != nil {
				if err := tx.EndLease(replace.ID, s.now()); err != nil {
					return err
				}
			}
			id, err := tx.AddLease(l)
			if err != nil {
				return err
			}
			if replace != nil {
				ls.leases = slices.DeleteFunc(ls.leases, func(x int64) bool { return x == replace.ID })
			}
			ls.leases = append(ls.leases, id)
			tx.Emit(Event{Kind: EvLeaseGranted, Task: l.Task, Session: session, Data: jsonData(map[string]any{
				"port": port, "endpoint": endpoint, "name": name})})
			return nil
		})
		out = BoardLease{Task: l.Task, Session: session, Name: name, Port: port, Endpoint: endpoint}
		return err
	})
	return out, err
}

func leaseNamePattern(name string) bool {
	if len(name) > 63 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ctlLeaseDrop releases the caller's leases: those of the given ports, the one of a
// name, or (neither) all it took through ctl.
func (s *Supervisor) ctlLeaseDrop(session string, ports []string, name string) ([]BoardLease, error) {
	want := map[int]bool{}
	for _, p := range ports {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("lease drop %q: not a port number", p)
		}
		want[n] = true
	}
	var dropped []BoardLease
	err := s.onSession(session, func(ls *liveSession, _ *Task) error {
		var ends []Lease
		for _, l := range s.heldLeases() {
			if l.Session != session {
				continue
			}
			match := want[l.Port] || (name != "" && l.Name == name)
			if len(want) == 0 && name == "" {
				match = ls.exposed[l.Port] || l.Name != ""
			}
			if match {
				ends = append(ends, l)
			}
		}
		if len(ends) == 0 {
			return errors.New("lease drop: this session holds no such lease")
		}
		if _, err := s.commit(func(tx Tx) error {
			for _, l := range ends {
				if err := tx.EndLease(l.ID, s.now()); err != nil {
					return err
				}
				tx.Emit(Event{Kind: EvLeaseReleased, Task: l.Task, Session: session, Data: jsonData(map[string]any{
					"port": l.Port, "name": l.Name})})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, l := range ends {
			ls.leases = slices.DeleteFunc(ls.leases, func(x int64) bool { return x == l.ID })
			if ls.exposed[l.Port] {
				ls.sb.Unexpose(l.Port)
				delete(ls.exposed, l.Port)
			}
			dropped = append(dropped, BoardLease{Task: l.Task, Session: session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint})
		}
		return nil
	})
	return dropped, err
}

// EndpointResult is where the caller reaches a named service.
type EndpointResult struct {
	Name    string `json:"name"`
	Address string `json:"address"` // host:port to connect to from the caller's sandbox
	Task    string `json:"task"`    // the owner
	Session string `json:"session"`
	Port    int    `json:"port"` // the port inside the owner's sandbox
}

// ctlEndpoint resolves a named lease to an address the caller can connect to from its
// own sandbox. The owner's port is exposed on the host; a private-network caller gets
// a relay listening inside its own namespace (on the same port number when free there).
func (s *Supervisor) ctlEndpoint(session, name string) (EndpointResult, error) {
	var res EndpointResult
	err := s.onSession(session, func(ls *liveSession, _ *Task) error {
		var l *Lease
		for _, h := range s.heldLeases() {
			if h.Name == name {
				l = &h
				break
			}
		}
		if l == nil {
			return fmt.Errorf("endpoint %q: no session leases that name (see `corral ctl board`)", name)
		}
		res = EndpointResult{Name: name, Task: l.Task, Session: l.Session, Port: l.Port}
		switch {
		case l.Session == session:
			res.Address = "127.0.0.1:" + strconv.Itoa(l.Port)
		case ls.sb.Network() != sandbox.NetPrivate:
			res.Address = l.Endpoint
		default:
			if r := ls.relays[name]; r != nil && r.Target() == l.Endpoint {
				res.Address = r.Addr()
				return nil
			} else if r != nil {
				r.Close()
			}
			r, err := sandbox.NewRelay(ls.sb.NetNSPath(), l.Port, l.Endpoint)
			if err != nil {
				return fmt.Errorf("endpoint %q: %w", name, err)
			}
			if ls.relays == nil {
				ls.relays = map[string]*sandbox.Relay{}
			}
			ls.relays[name] = r
			res.Address = r.Addr()
		}
		return nil
	})
	return res, err
}
