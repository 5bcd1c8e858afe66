package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/policies"
	"corral/sandbox"
)

func errSessionGone(session string) error {
	return fmt.Errorf("session %s has ended", session)
}

// ctlDispatch runs one verb for session. cancel closes when the caller has gone or the
// session ends: verbs that block give up then.
func (s *Supervisor) ctlDispatch(session string, req CtlRequest, cancel <-chan struct{}) (any, error) {
	a := req.Args
	switch req.Verb {
	case VerbBoard:
		return s.Board(), nil
	case VerbStatus:
		return s.sessionStatus(session)
	case VerbIntent:
		if len(a) < 1 || (a[0] != "add" && a[0] != "drop") {
			return nil, errors.New("intent: want add GLOB… or drop [GLOB…]")
		}
		return s.ctlIntent(session, a[0] == "add", a[1:])
	case VerbLease:
		switch {
		case len(a) == 2 && a[0] == "port":
			port, err := strconv.Atoi(a[1])
			if err != nil {
				return nil, fmt.Errorf("lease port %q: not a number", a[1])
			}
			return s.ctlLease(session, port, req.Flags["name"])
		case len(a) >= 1 && a[0] == "drop":
			return s.ctlLeaseDrop(session, a[1:], req.Flags["name"])
		}
		return nil, errors.New("lease: want port PORT [--name NAME] or drop [PORT] [--name NAME]")
	case VerbEndpoint:
		if len(a) != 1 {
			return nil, errors.New("endpoint: want one NAME")
		}
		return s.ctlEndpoint(session, a[0])
	case VerbPublish:
		return s.ctlPublish(session, req.Flags["message"], cancel)
	case VerbHandoff:
		if len(a) != 1 {
			return nil, errors.New("handoff: want one TASK id")
		}
		return s.ctlHandoff(session, a[0], req.Flags)
	case VerbWait:
		return s.ctlWait(session, a, req.Flags, cancel)
	case VerbAsk:
		if len(a) == 0 || strings.TrimSpace(strings.Join(a, " ")) == "" {
			return nil, errors.New("ask: want the question")
		}
		return s.ctlAsk(session, strings.Join(a, " "), req.Flags, cancel)
	}
	return nil, fmt.Errorf("unknown verb %q (want board, status, intent, lease, endpoint, publish, handoff, wait or ask)", req.Verb)
}

// IntentResult is what `ctl intent` reports: the caller's intent now and every live
// task it overlaps, told at once.
type IntentResult struct {
	Intent   []string        `json:"intent"`
	Overlaps []IntentOverlap `json:"overlaps"`
}

// IntentOverlap is another task whose intent covers files this one's does.
type IntentOverlap struct {
	Task    string   `json:"task"`
	Session string   `json:"session,omitempty"`
	State   string   `json:"state"`
	Intent  []string `json:"intent"`
	Files   []string `json:"files,omitempty"` // base files both match, at most a few
}

// ctlIntent adds globs to (or drops them from; none: all) the caller's task intent.
// Each overlap becomes an intent.overlap event naming both tasks, which both see on
// the board and in their status.
func (s *Supervisor) ctlIntent(session string, add bool, globs []string) (IntentResult, error) {
	for _, g := range globs {
		if err := policies.ValidIntent(g); err != nil {
			return IntentResult{}, fmt.Errorf("intent: %w", err)
		}
	}
	if add && len(globs) == 0 {
		return IntentResult{}, errors.New("intent add: want at least one GLOB")
	}
	var res IntentResult
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		t := s.tasks[ls.rec.Task]
		next := slices.Clone(t.Intent)
		if add {
			for _, g := range globs {
				if !slices.Contains(next, g) {
					next = append(next, g)
				}
			}
		} else if len(globs) == 0 {
			next = nil
		} else {
			next = slices.DeleteFunc(next, func(g string) bool { return slices.Contains(globs, g) })
		}
		t.Intent = next
		res.Intent = nonNil(next)
		res.Overlaps = []IntentOverlap{}
		var evs []Event
		for _, id := range s.order {
			o := s.tasks[id]
			if o.ID == t.ID || o.State.Ended() || !s.intentsOverlap(*t, *o) {
				continue
			}
			ov := IntentOverlap{Task: o.ID, State: string(o.State), Intent: nonNil(o.Intent), Files: s.overlapFiles(*t, *o, 5)}
			if ols := s.liveOf(o.ID); ols != nil {
				ov.Session = ols.rec.ID
			}
			res.Overlaps = append(res.Overlaps, ov)
			evs = append(evs, Event{Kind: EvIntentOverlap, Task: t.ID, Session: session, Data: jsonData(map[string]any{
				"with": o.ID, "with_session": ov.Session, "files": ov.Files, "policy": s.fleet.Admission.Overlap})})
		}
		t.Updated = s.now()
		_, err = s.commit(func(tx Tx) error {
			if err := tx.PutTask(*t); err != nil {
				return err
			}
			tx.Emit(Event{Kind: EvIntentChanged, Task: t.ID, Session: session, Data: jsonData(map[string]any{"intent": res.Intent})})
			for _, e := range evs {
				tx.Emit(e)
			}
			return nil
		})
	})
	return res, err
}

// overlapFiles lists up to n base files both tasks' intents match, or the globs they
// share when no base file matches (new files).
func (s *Supervisor) overlapFiles(a, b Task, n int) []string {
	var out []string
	for _, f := range s.baseFiles {
		if matchAny(a.Intent, f) && matchAny(b.Intent, f) {
			if out = append(out, f); len(out) == n {
				return out
			}
		}
	}
	if len(out) == 0 {
		for _, g := range a.Intent {
			if slices.Contains(b.Intent, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

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
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		held := s.heldLeases()
		var replace *Lease
		for i, l := range held {
			switch {
			case name != "" && l.Name == name && l.Session != session:
				err = fmt.Errorf("lease name %q: held by session %s (task %s)", name, l.Session, l.Task)
				return
			case l.Session == session && l.Port == port:
				if l.Name == name {
					out = BoardLease{Task: l.Task, Session: session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint}
					return // already held as asked
				}
				replace = &held[i]
			case l.Session == session && name != "" && l.Name == name:
				err = fmt.Errorf("lease name %q: already names this session's port %d (drop it first)", name, l.Port)
				return
			}
		}
		endpoint := ""
		if replace != nil {
			endpoint = replace.Endpoint // the port is exposed already; it gains a name
		} else {
			ep, xerr := ls.sb.Expose(port)
			if xerr != nil {
				err = fmt.Errorf("lease port %d: %w", port, xerr)
				return
			}
			endpoint = ep.Host
			if ls.exposed == nil {
				ls.exposed = map[int]bool{}
			}
			ls.exposed[port] = true
		}
		l := Lease{Session: session, Task: ls.rec.Task, Name: name, Port: port, Endpoint: endpoint, Start: s.now()}
		_, err = s.commit(func(tx Tx) error {
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
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
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
			err = errors.New("lease drop: this session holds no such lease")
			return
		}
		_, err = s.commit(func(tx Tx) error {
			for _, l := range ends {
				if err := tx.EndLease(l.ID, s.now()); err != nil {
					return err
				}
				tx.Emit(Event{Kind: EvLeaseReleased, Task: l.Task, Session: session, Data: jsonData(map[string]any{
					"port": l.Port, "name": l.Name})})
			}
			return nil
		})
		if err != nil {
			return
		}
		for _, l := range ends {
			ls.leases = slices.DeleteFunc(ls.leases, func(x int64) bool { return x == l.ID })
			if ls.exposed[l.Port] {
				ls.sb.Unexpose(l.Port)
				delete(ls.exposed, l.Port)
			}
			dropped = append(dropped, BoardLease{Task: l.Task, Session: session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint})
		}
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
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		var l *Lease
		for _, h := range s.heldLeases() {
			if h.Name == name {
				l = &h
				break
			}
		}
		if l == nil {
			err = fmt.Errorf("endpoint %q: no session leases that name (see `corral ctl board`)", name)
			return
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
				return
			} else if r != nil {
				r.Close()
			}
			r, rerr := sandbox.NewRelay(ls.sb.NetNSPath(), l.Port, l.Endpoint)
			if rerr != nil {
				err = fmt.Errorf("endpoint %q: %w", name, rerr)
				return
			}
			if ls.relays == nil {
				ls.relays = map[string]*sandbox.Relay{}
			}
			ls.relays[name] = r
			res.Address = r.Addr()
		}
	})
	return res, err
}

// PublishOutcome is what `ctl publish` returns: the publish record and its conflicts.
type PublishOutcome struct {
	Publish   Publish         `json:"publish"`
	Conflicts []BoardConflict `json:"conflicts,omitempty"`
	Behind    int             `json:"behind"` // after an accepted publish the caller's base is behind its own work
}

// ctlPublish publishes a persistent session's changeset now and waits for the
// outcome (one-shot sessions publish when their agent exits).
func (s *Supervisor) ctlPublish(session, message string, cancel <-chan struct{}) (PublishOutcome, error) {
	events, unsub := s.Subscribe(256)
	defer unsub()
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		t := s.tasks[ls.rec.Task]
		switch {
		case t.Lifetime != Persistent:
			err = notApplicable("task %s is one-shot: it publishes when its agent exits", t.ID)
		case t.State == TaskPublishing:
			err = notApplicable("task %s is publishing already", t.ID)
		default:
			s.publishSessionMsg(ls, 0, false, message)
		}
	})
	if err != nil {
		return PublishOutcome{}, err
	}
	for {
		select {
		case <-cancel:
			return PublishOutcome{}, errors.New("publish: the call was cut before the outcome (it may still land; see board)")
		case e, ok := <-events:
			if !ok {
				return PublishOutcome{}, errors.New("publish: the supervisor stopped")
			}
			if e.Session != session || !strings.HasPrefix(e.Kind, "publish.") || e.Kind == EvPublishQueued {
				continue
			}
			var d struct {
				Publish int64 `json:"publish"`
			}
			json.Unmarshal(e.Data, &d)
			return s.publishOutcome(d.Publish)
		}
	}
}

func (s *Supervisor) publishOutcome(id int64) (PublishOutcome, error) {
	var out PublishOutcome
	err := s.store.View(func(r Reader) error {
		p, err := findPublish(r, id)
		if err != nil {
			return err
		}
		out.Publish = p
		cs, err := r.Conflicts(id)
		for _, c := range cs {
			out.Conflicts = append(out.Conflicts, BoardConflict{Path: c.Path, Class: c.Class})
		}
		return err
	})
	return out, err
}

// WaitResult says what a wait saw change.
type WaitResult struct {
	What    string          `json:"what"` // head, publish or lease
	Head    string          `json:"head,omitempty"`
	Behind  int             `json:"behind"` // commits the head is now ahead of the caller's base
	Publish *Publish        `json:"publish,omitempty"`
	Lease   *BoardLease     `json:"lease,omitempty"`
	Event   json.RawMessage `json:"event,omitempty"`
}

// ctlWait blocks until the head moves (head [--from REV]: away from REV, default the
// head now), a publish has an outcome (publish), or a named lease is held (lease NAME:
// at once if it is already), or --timeout passes.
func (s *Supervisor) ctlWait(session string, args []string, flags map[string]string, cancel <-chan struct{}) (WaitResult, error) {
	if len(args) == 0 {
		return WaitResult{}, errors.New("wait: want head, publish or lease NAME")
	}
	var timeout <-chan time.Time
	if v := flags["timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return WaitResult{}, fmt.Errorf("wait --timeout %q: %w", v, err)
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	events, unsub := s.Subscribe(1024)
	defer unsub()
	var base, head string
	var gone error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			gone = errSessionGone(session)
			return
		}
		base, head = ls.rec.Base, s.fleet.Head
	})
	if gone != nil {
		return WaitResult{}, gone
	}
	what := args[0]
	match := func(e Event) (WaitResult, bool) { return WaitResult{}, false }
	switch what {
	case "head":
		from := head
		if v := flags["from"]; v != "" {
			out, err := s.repo.Git("rev-parse", "--verify", "--quiet", v+"^{commit}")
			if err != nil {
				return WaitResult{}, fmt.Errorf("wait head --from %q: not a commit of the repository", v)
			}
			from = strings.TrimSpace(out)
		}
		check := func() (WaitResult, bool) {
			h := s.Fleet().Head
			if h != from {
				return WaitResult{What: what, Head: h, Behind: s.behind(base, h)}, true
			}
			return WaitResult{}, false
		}
		if r, ok := check(); ok {
			return r, nil
		}
		match = func(e Event) (WaitResult, bool) {
			if strings.HasPrefix(e.Kind, "publish.") {
				return check()
			}
			return WaitResult{}, false
		}
	case "publish":
		match = func(e Event) (WaitResult, bool) {
			if !strings.HasPrefix(e.Kind, "publish.") || e.Kind == EvPublishQueued {
				return WaitResult{}, false
			}
			var d struct {
				Publish int64 `json:"publish"`
			}
			json.Unmarshal(e.Data, &d)
			out, err := s.publishOutcome(d.Publish)
			if err != nil {
				return WaitResult{}, false
			}
			h := s.Fleet().Head
			return WaitResult{What: what, Head: h, Behind: s.behind(base, h), Publish: &out.Publish, Event: jsonData(e)}, true
		}
	case "lease":
		if len(args) != 2 {
			return WaitResult{}, errors.New("wait lease: want the lease NAME")
		}
		name := args[1]
		check := func() (WaitResult, bool) {
			for _, l := range s.heldLeases() {
				if l.Name == name {
					return WaitResult{What: what, Lease: &BoardLease{Task: l.Task, Session: l.Session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint}}, true
				}
			}
			return WaitResult{}, false
		}
		if r, ok := check(); ok {
			return r, nil
		}
		match = func(e Event) (WaitResult, bool) {
			if e.Kind == EvLeaseGranted {
				return check()
			}
			return WaitResult{}, false
		}
	default:
		return WaitResult{}, fmt.Errorf("wait %q: want head, publish or lease NAME", what)
	}
	for {
		select {
		case <-cancel:
			return WaitResult{}, errors.New("wait: cut before anything changed")
		case <-timeout:
			return WaitResult{}, fmt.Errorf("wait %s: nothing changed within %s", what, flags["timeout"])
		case e, ok := <-events:
			if !ok {
				return WaitResult{}, errors.New("wait: the supervisor stopped")
			}
			if r, ok := match(e); ok {
				return r, nil
			}
		}
	}
}

// ctlAsk puts a question in the inbox and, unless nowait, waits for the answer.
func (s *Supervisor) ctlAsk(session, question string, flags map[string]string, cancel <-chan struct{}) (InboxItem, error) {
	kind := flags["kind"]
	switch kind {
	case "":
		kind = InboxNeedsInput
	case InboxNeedsInput, InboxPermission, InboxDone, InboxRateLimited:
	case "needs-input":
		kind = InboxNeedsInput
	default:
		return InboxItem{}, fmt.Errorf("ask --kind %q: want needs-input, permission, done or rate-limited", kind)
	}
	var it *InboxItem
	var ch chan string
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		it = s.openInbox(InboxItem{Kind: kind, Task: ls.rec.Task, Session: session, Text: question, Asked: true, Screen: lastScreen(ls)})
		ch = make(chan string, 1)
		s.asks[it.ID] = ch
	})
	if err != nil {
		return InboxItem{}, err
	}
	var snapshot InboxItem
	s.call(func() { snapshot = *it })
	if flags["nowait"] != "" {
		return snapshot, nil
	}
	select {
	case ans, ok := <-ch:
		s.call(func() { snapshot = *it })
		if !ok {
			return snapshot, fmt.Errorf("ask: item %d closed without an answer (%s)", snapshot.ID, snapshot.State)
		}
		snapshot.Answer = ans
		return snapshot, nil
	case <-cancel:
		s.call(func() {
			if it.State == InboxOpen {
				delete(s.asks, it.ID)
				s.closeInbox(it, InboxResolved, "")
			}
		})
		return InboxItem{}, errors.New("ask: the call was cut before an answer")
	}
}
