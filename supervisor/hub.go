package supervisor

import "sync"

// hub fans events out to subscribers without ever blocking the supervisor: each
// subscriber has a buffer, and a subscriber that falls behind loses events (it sees the
// gap in Seq and can read the rest from the store).
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan Event]struct{}{}} }

// subscribe returns a channel of events and the function that ends the subscription.
func (h *hub) subscribe(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = 256
	}
	ch := make(chan Event, buffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			if _, ok := h.subs[ch]; ok {
				delete(h.subs, ch)
				close(ch)
			}
			h.mu.Unlock()
		})
	}
}

// publish offers events to every subscriber, dropping what a full buffer cannot take.
func (h *hub) publish(evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		for _, e := range evs {
			select {
			case ch <- e:
			default:
			}
		}
	}
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
