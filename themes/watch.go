package themes

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch signals when a skin in dir changes, until ctx ends (the channel closes then).
// Editors save in bursts (write, chmod, rename), so a burst becomes one signal once
// the directory has been quiet for a moment. It fails if dir does not exist: there is
// then nothing to reload.
func Watch(ctx context.Context, dir string) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer w.Close()
		const quiet = 100 * time.Millisecond
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				timer.Reset(quiet)
			case <-w.Errors:
			case <-timer.C:
				select {
				case out <- struct{}{}:
				default: // a reload is pending already
				}
			}
		}
	}()
	return out, nil
}
