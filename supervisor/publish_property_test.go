package supervisor_test

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// TestPublishProperty publishes random changesets from random earlier heads in random
// order and checks after each one: a landed publish changed exactly its own paths (to
// its content, unless merged); a rejected, escalated or empty one left the head as it
// was — no path of it leaks; the history stays linear, one commit per landed publish;
// and `git fsck` finds nothing wrong with the objects corral wrote.
func TestPublishProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CORRAL_PROPERTY_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (CORRAL_PROPERTY_SEED reruns it)", seed)
	rng := rand.New(rand.NewSource(seed))
	files := map[string]string{}
	for i := 0; i < 8; i++ {
		var lines []string
		for k := 0; k < 12; k++ {
			lines = append(lines, fmt.Sprintf("line %d of f%d", k, i))
		}
		files[fmt.Sprintf("d%d/f%d.txt", i%3, i)] = strings.Join(lines, "\n") + "\n"
	}
	r := newPubRepo(t, files)
	heads := []string{r.base}
	landed := 0
	for step := 0; step < 60; step++ {
		base := heads[rng.Intn(len(heads))]
		changes := randomChanges(t, r, rng, base, step)
		before := r.head()
		res, err := r.pub.Publish(r.request(fmt.Sprintf("t%d", step), base, changes))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		after := r.head()
		switch res.Outcome {
		case supervisor.OutcomeAccepted, supervisor.OutcomeMerged:
			landed++
			heads = append(heads, after)
			if parent := run(t, r.dir, "git", "rev-parse", after+"^"); parent != before {
				t.Fatalf("step %d: new head's parent %s, want the old head %s", step, parent, before)
			}
			touched := run(t, r.dir, "git", "diff", "--name-only", before, after)
			for _, p := range strings.Fields(touched) {
				if _, ok := changes[p]; !ok {
					t.Fatalf("step %d: head changed %s, not in the changeset %v", step, p, keys(changes))
				}
			}
			merged := map[string]bool{}
			for _, p := range res.Merged {
				merged[p] = true
			}
			for p, want := range changes {
				if !merged[p] && r.show(p) != want {
					t.Fatalf("step %d: head %s = %q, want ours %q", step, p, r.show(p), want)
				}
			}
		default:
			if after != before {
				t.Fatalf("step %d: %s publish moved the head", step, res.Outcome)
			}
		}
	}
	if n := run(t, r.dir, "git", "rev-list", "--count", r.base+"..corral/head"); n != fmt.Sprint(landed) {
		t.Errorf("%s commits on the head, %d publishes landed", n, landed)
	}
	if merges := run(t, r.dir, "git", "rev-list", "--merges", "corral/head"); merges != "" {
		t.Errorf("head history is not linear: %s", merges)
	}
	run(t, r.dir, "git", "fsck", "--strict", "--no-dangling", "--no-progress")
	t.Logf("%d of 60 publishes landed", landed)
}

// randomChanges edits a line of a file, adds a file, or deletes one, as of base.
func randomChanges(t *testing.T, r *pubRepo, rng *rand.Rand, base string, step int) map[string]string {
	list := strings.Fields(run(t, r.dir, "git", "ls-tree", "-r", "--name-only", base))
	changes := map[string]string{}
	for n := 1 + rng.Intn(3); n > 0; n-- {
		switch k := rng.Intn(10); {
		case k < 7 && len(list) > 0:
			p := list[rng.Intn(len(list))]
			lines := strings.Split(strings.TrimSuffix(run(t, r.dir, "git", "show", base+":"+p)+"\n", "\n"), "\n")
			lines[rng.Intn(len(lines))] = fmt.Sprintf("edited at step %d", step)
			changes[p] = strings.Join(lines, "\n") + "\n"
		case k < 9:
			changes[fmt.Sprintf("d%d/new%d.txt", rng.Intn(3), rng.Intn(20))] = fmt.Sprintf("added at step %d\n", step)
		case len(list) > 0:
			changes[list[rng.Intn(len(list))]] = del
		}
	}
	return changes
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
