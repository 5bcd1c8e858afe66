package sandbox

import (
	"sync"
)

// InitPool keeps spare sandbox inits booted for one repository: cloned into fresh
// namespaces, Go runtime up, the session-independent half of the root mounted and lo
// up. A session started from a spare only does its own part (cgroup, workspace
// overlay, pivot, exec), which is most of the way to the 20 ms start goal on a loaded
// host. Spares are made one at a time in the background and replaced when taken.
//
// A spare's own few hundred KiB are charged to the supervisor's cgroup, not to the
// session that later takes it; it runs no agent code until it is in its session's
// cgroup.
type InitPool struct {
	repo Repo
	size int

	mu     sync.Mutex
	spares []*bootedInit
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// NewInitPool starts keeping size spare inits (private network) for repo.
func NewInitPool(repo Repo, size int) *InitPool {
	p := &InitPool{repo: repo, size: size, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.fill()
	p.kick()
	return p
}

func (p *InitPool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fill makes spares until the pool is full, each time it is woken.
func (p *InitPool) fill() {
	defer close(p.done)
	for range p.wake {
		for {
			p.mu.Lock()
			need := !p.closed && len(p.spares) < p.size
			p.mu.Unlock()
			if !need {
				break
			}
			b, err := spawnInit(p.repo, NetPrivate)
			if err != nil {
				break // sessions start cold; the next take tries again
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				b.discard()
				break
			}
			p.spares = append(p.spares, b)
			p.mu.Unlock()
		}
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
	}
}

// take hands out a live spare for the network mode, or nil (start cold).
func (p *InitPool) take(network Network) *bootedInit {
	if p == nil || network != NetPrivate {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	defer p.kick() // under mu, before Close can close the channel
	for len(p.spares) > 0 {
		b := p.spares[0]
		p.spares = p.spares[1:]
		if b.alive() {
			return b
		}
		go b.discard()
	}
	return nil
}

// Close stops refilling and kills the spares.
func (p *InitPool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	spares := p.spares
	p.spares = nil
	p.mu.Unlock()
	p.kick()
	close(p.wake)
	<-p.done
	for _, b := range spares {
		b.discard()
	}
}
