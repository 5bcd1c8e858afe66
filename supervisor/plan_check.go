package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"corral/policies"
	"corral/sandbox"
)

// checkTasks checks what no single task can: ids unique (also against the fleet's
// existing tasks), dependencies that exist and do not loop, and reservations that fit
// the fleet's budget — a task larger than the budget would wait forever.
func (d *planDecoder) checkTasks(tasks []*planTask, existing []Task, adm Admission) {
	firstLine := map[string]int{}
	var ids []string
	for _, t := range existing {
		firstLine[t.ID] = 0
		ids = append(ids, t.ID)
	}
	for _, t := range tasks {
		idField := t.field + ".id"
		switch line, dup := firstLine[t.ID]; {
		case t.set["id"] == "":
			d.problem(idField, "missing: every task needs an id")
		case t.ID == "":
			// Empty or of the wrong type: already reported.
		case dup && line == 0:
			d.problem(idField, "%q already exists in the fleet", t.ID)
		case dup:
			d.problem(idField, "duplicate id %q (first at line %d)", t.ID, line)
		default:
			firstLine[t.ID] = d.line(idField)
			ids = append(ids, t.ID)
		}
	}

	deps := map[string][]string{}
	for _, t := range existing {
		deps[t.ID] = t.After
	}
	afterField := map[string]string{} // task id → the field its after came from
	for _, t := range tasks {
		from := t.set["after"]
		for i, a := range t.After {
			if _, known := firstLine[a]; !known {
				if s := policies.Suggest(a, ids); s != "" {
					d.problem(fmt.Sprintf("%s[%d]", from, i), "unknown task %q (did you mean %q?)", a, s)
				} else {
					d.problem(fmt.Sprintf("%s[%d]", from, i), "unknown task %q", a)
				}
			}
		}
		if t.ID != "" && len(t.After) > 0 {
			if _, taken := afterField[t.ID]; !taken {
				deps[t.ID] = t.After
				afterField[t.ID] = from
			}
		}
	}
	for _, cycle := range policies.FindCycles(ids, deps) {
		// A cycle of new tasks is reported at the after of its first new member.
		at := ""
		for _, id := range cycle {
			if f, ok := afterField[id]; ok {
				at = f
				break
			}
		}
		if at != "" {
			d.problem(at, "dependency cycle: %s", strings.Join(cycle, " -> "))
		}
	}

	for _, t := range tasks {
		if adm.CPU > 0 && t.CPU > adm.CPU {
			d.problem(t.set["cpu"], "%v cores exceed the fleet's budget of %v (fleet.cpu): the task could never be admitted", t.CPU, adm.CPU)
		}
		if adm.Memory > 0 && t.Memory > adm.Memory {
			d.problem(t.set["memory"], "%s exceeds the fleet's budget of %s (fleet.memory): the task could never be admitted",
				policies.FormatSize(t.Memory), policies.FormatSize(adm.Memory))
		}
	}
}

// checkRepo resolves the fleet's repository and base (reporting them at the repo and
// base lines) and checks the head branch. It returns nil when the repository cannot
// be opened, so checks that need it are skipped instead of failing twice.
func (d *planDecoder) checkRepo(dir string, f *Fleet) *sandbox.Repo {
	path := f.Repo
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	repo := d.openRepo(path, "fleet.repo")
	if repo == nil {
		return nil
	}
	f.Repo = repo.WorkTree
	if f.Name == "" {
		f.Name = filepath.Base(repo.WorkTree)
	}
	base, err := repo.ResolveRev(f.BaseRef)
	if err != nil {
		msg := fmt.Sprintf("unknown revision %q in %s", f.BaseRef, repo.WorkTree)
		if out, err := repo.Git("for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags"); err == nil {
			if s := policies.Suggest(f.BaseRef, strings.Fields(out)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		d.problem("fleet.base", "%s", msg)
	}
	f.Base = base

	// The head is corral's branch: accepted publishes move it without asking, so it
	// must not be the branch the fleet starts from or the one the user has checked out.
	if _, err := repo.Git("check-ref-format", "--branch", f.HeadRef); err != nil {
		d.problem("fleet.head", "%q is not a valid branch name", f.HeadRef)
	} else if short := strings.TrimPrefix(f.BaseRef, "refs/heads/"); strings.TrimPrefix(f.HeadRef, "refs/heads/") == short {
		d.problem("fleet.head", "%q is the base branch; corral moves its head on its own and never touches your branches (default \"corral/head\")", f.HeadRef)
	} else if cur, err := repo.Git("symbolic-ref", "--quiet", "--short", "HEAD"); err == nil && strings.TrimSpace(cur) == f.HeadRef {
		d.problem("fleet.head", "%q is checked out in %s; corral moves its head on its own and never touches your branches", f.HeadRef, repo.WorkTree)
	}
	return repo
}

// openRepo opens the repository at path, reporting a failure at field.
func (d *planDecoder) openRepo(path, field string) *sandbox.Repo {
	repo, err := sandbox.OpenRepo(path)
	switch {
	case err == nil:
		return &repo
	case errors.Is(err, os.ErrNotExist):
		d.problem(field, "%s does not exist", path)
	case errors.Is(err, sandbox.ErrNoRepo):
		d.problem(field, "%s is not in a git work tree", path)
	default:
		d.problem(field, "%v", err)
	}
	return nil
}

// checkIntents reports intent globs that match no file of the base: a glob that
// claims nothing is usually a typo, and it would also hide real overlaps.
func (d *planDecoder) checkIntents(repo *sandbox.Repo, f Fleet, tasks []*planTask) {
	if f.Base == "" {
		return // unknown base: reported at fleet.base
	}
	out, err := repo.Git("ls-tree", "-r", "--name-only", "-z", f.Base)
	if err != nil {
		d.problem("fleet.base", "list files of %s: %v", f.BaseRef, err)
		return
	}
	files := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	reported := map[string]bool{} // a default's glob is reported once, not per task
	for _, t := range tasks {
		for i, g := range t.Intent {
			field := fmt.Sprintf("%s[%d]", t.set["intent"], i)
			if reported[field] || policies.ValidIntent(g) != nil {
				continue
			}
			if planMatchesAny(g, files) {
				continue
			}
			reported[field] = true
			msg := fmt.Sprintf("glob %q matches no file in base %s (%s)", g, f.BaseRef, planShortRev(f.Base))
			// "pricing" names files called pricing; the directory's files are "pricing/**".
			if dir := strings.TrimSuffix(g, "/") + "/**"; !strings.ContainsAny(g, "*?[") && planMatchesAny(dir, files) {
				msg += fmt.Sprintf(" (did you mean %q?)", dir)
			}
			d.problem(field, "%s", msg)
		}
	}
}

func planMatchesAny(glob string, files []string) bool {
	for _, f := range files {
		if policies.MatchGlob(glob, f) {
			return true
		}
	}
	return false
}

// checkEnvFiles reports env-layer files missing from the work tree: the session
// would start without the .env or node_modules its agent expects.
func (d *planDecoder) checkEnvFiles(workTree string, tasks []*planTask) {
	reported := map[string]bool{}
	for _, t := range tasks {
		for i, e := range t.EnvFiles {
			field := fmt.Sprintf("%s[%d]", t.set["env"], i)
			if reported[field] || filepath.IsAbs(e) || strings.HasPrefix(e, "..") {
				continue // reported when decoded
			}
			if _, err := os.Lstat(filepath.Join(workTree, e)); err != nil {
				reported[field] = true
				d.problem(field, "%q is not in the work tree %s", e, workTree)
			}
		}
	}
}

func planShortRev(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}
