package sandbox

import (
	"fmt"
	"os"
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
	seq    int
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
			b, err := p.spawn()
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

// spawn boots a spare and puts it in a cgroup of its own, which the session that takes
// it keeps: creating a cgroup and migrating a process into it are the costliest steps
// of a start on a v1 host, and here they happen before anyone waits.
func (p *InitPool) spawn() (*bootedInit, error) {
	b, err := spawnInit(p.repo, NetPrivate)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.seq++
	name := fmt.Sprintf("%spool-%d-%d", CgroupPrefix(p.repo), os.Getpid(), p.seq)
	p.mu.Unlock()
	if b.cg, err = NewCgroup(name, Limits{}); err != nil {
		b.discard()
		return nil, err
	}
	if err := b.cg.Add(b.cmd.Process.Pid); err != nil {
		b.discard()
		return nil, err
	}
	return b, nil
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

// refill asks for taken spares to be replaced. Sessions call it once they are up, so
// booting the replacement (a clone, an exec, a Go runtime) does not compete for the
// CPU with the start that took the spare.
func (p *InitPool) refill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed { // under mu, so Close cannot close the channel under us
		p.kick()
	}
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

// Spares returns how many spare inits are booted and waiting.
func (p *InitPool) Spares() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.spares)
}
