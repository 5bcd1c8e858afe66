package sandbox

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// runInNetns runs f on an OS thread switched into the network namespace ns, then
// switches that thread back to the namespace it had. A socket keeps the namespace it
// was created in, so a connection or listener f makes still talks to the sandbox
// after the switch back, served by any goroutine of the host. Only f's own syscalls
// run there: f must not start goroutines or resolve names (those run on other
// threads, in the host's namespace), so dial and listen on IP literals.
//
// The work runs on a locked thread in a goroutine of its own, so that, if switching
// back fails, the thread stays locked and the runtime discards it when the goroutine
// exits instead of handing a thread in the wrong namespace to other goroutines.
//
// f does not run when entering fails. When switching back fails f has run, and the
// caller must close whatever f made. The errors name the step that failed, for the
// caller to prefix with what it was doing.
func runInNetns(ns *os.File, f func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// /proc/thread-self, not /proc/self: namespaces are per thread and only this
		// thread's is the one to return to.
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			done <- fmt.Errorf("setns back to host: %w", err)
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	return <-done
}
