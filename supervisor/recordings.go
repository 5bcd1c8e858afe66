package supervisor

import (
	"path/filepath"

	"corral/sandbox"
)

// RecordingPath is where a session's terminal recording lives: apart from its
// session directory (which goes when the session is published or discarded), under
// its run, so replay outlives sessions and `corral gc` can drop a whole run's at once.
func RecordingPath(repo sandbox.Repo, f Fleet, session string) string {
	return filepath.Join(RecordingsDir(repo, f), session+".cast")
}

// RecordingsDir is a run's recordings directory: one per fleet database (a fresh run
// of the same fleet has a new creation time, so its own directory).
func RecordingsDir(repo sandbox.Repo, f Fleet) string {
	return filepath.Join(repo.StateDir, "rec", f.Name+"-"+f.Created.UTC().Format("20060102T150405.000"))
}
