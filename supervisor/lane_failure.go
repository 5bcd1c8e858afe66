package supervisor

import (
	"os"
	"path/filepath"
)

// failureFile is where a task's latest failure report (a red lane's output, a failed
// accept check) lives; its sessions read a copy at $CORRAL_FAILURE.
func (s *Supervisor) failureFile(task string) string {
	return filepath.Join(s.repo.StateDir, "failures", task+".txt")
}

// writeFailure stores a task's failure report (write then rename).
func (s *Supervisor) writeFailure(task, text string) error {
	path := s.failureFile(task)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// failureView is where a session reads its task's failure report: beside its
// conflict view, outside the repository (see conflictView).
func (s *Supervisor) failureView(session string) string {
	return filepath.Join(filepath.Dir(s.conflictView(session)), "failure-"+session+".txt")
}

// exposeFile copies a host report into the view a session binds, and returns the view.
func (s *Supervisor) exposeFile(src, view string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(view), 0o755); err != nil {
		return "", err
	}
	return view, os.WriteFile(view, data, 0o644)
}
