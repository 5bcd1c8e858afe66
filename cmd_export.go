package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"corral/sandbox"
	"corral/supervisor"
)

// runExport is `corral export SESSION [-o FILE] [--run RUN]`: a session's terminal as
// an asciicast v2 file, which `asciinema play` plays. Every line is checked on the way
// (a recording cut short by a crash loses only its unfinished last line).
func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	run := fs.String("run", "", "the run holding the session (default: every run, most recent first)")
	outPath := fs.String("o", "-", "write to FILE (- for standard output)")
	if err := parseFlags(fs, reorderValueFlags(args, "repo", "run", "o")); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInput("export: want one SESSION id")
	}
	id := fs.Arg(0)
	rec, err := findSession(*repoDir, *run, id)
	if err != nil {
		return err
	}
	out := stdout
	if *outPath != "-" {
		f, err := os.Create(*outPath)
		if err != nil {
			return badInput("-o: %v", err)
		}
		defer f.Close()
		out = f
	}
	n, err := exportCast(out, rec.Recording, id)
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	if *outPath != "-" {
		fmt.Fprintf(stderr, "corral export: %s: %d events written to %s (asciinema play %s)\n", id, n, *outPath, *outPath)
	}
	return nil
}

// findSession finds a session's record in a run, or in the most recent run that has it.
func findSession(repoDir, run, id string) (supervisor.Session, error) {
	repo, err := sandbox.OpenRepo(repoDir)
	if err != nil {
		return supervisor.Session{}, badInput("--repo: %v", err)
	}
	runs := listRuns(repo)
	if run != "" {
		_, ref, err := resolveRun(repoDir, run)
		if err != nil {
			return supervisor.Session{}, err
		}
		runs = []runRef{ref}
	}
	for _, r := range runs {
		_, _, db, h, err := loadRun(repoDir, r.Path)
		if err != nil {
			continue
		}
		db.Close()
		if s, ok := h.Session(id); ok {
			return s, nil
		}
	}
	return supervisor.Session{}, badInput("session %q: not in any run of %s", id, repo.WorkTree)
}

// exportCast copies a recording as asciicast v2 with the session as its title,
// checking every line; it returns how many events it wrote.
func exportCast(w io.Writer, path, title string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("recording: %w (corral gc may have removed an old run's recordings)", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	head, err := r.ReadBytes('\n')
	if err != nil && len(head) == 0 {
		return 0, fmt.Errorf("recording %s: %w: empty", path, sandbox.ErrNotCast)
	}
	var hdr map[string]any
	if err := json.Unmarshal(head, &hdr); err != nil {
		return 0, fmt.Errorf("recording %s: %w: header: %v", path, sandbox.ErrNotCast, err)
	}
	if _, _, _, err := sandbox.ParseCastHeader(head); err != nil {
		return 0, fmt.Errorf("recording %s: %w", path, err)
	}
	if hdr["title"] == nil {
		hdr["title"] = title
	}
	bw := bufio.NewWriter(w)
	hb, _ := json.Marshal(hdr)
	bw.Write(append(hb, '\n'))
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if _, perr := sandbox.ParseCastEvent([]byte(strings.TrimSpace(string(line)))); perr == nil {
				bw.Write(line)
				n++
			}
		}
		if err != nil {
			break
		}
	}
	return n, bw.Flush()
}
