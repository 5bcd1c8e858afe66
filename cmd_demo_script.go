package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"corral/supervisor"
)

// demoPreviews are the two tasks that both serve port 4173.
var demoPreviews = []string{"preview-a", "preview-b"}

// demoStory is what the headless demo's human did and saw; the run passes when every
// part of the story happened.
type demoStory struct {
	pausedResumed bool
	previews      map[string]string // task → endpoint that answered as that task
	approved      []int64
	rejected      bool
	rebased       string // what rebasing preview-a onto the moved head did
}

// runDemoHeadless runs the fleet to completion while the demo script plays the human:
// it pauses and resumes the slow agent, checks both previews answer on their own
// endpoints and then discards them, and approves escalated publishes.
func runDemoHeadless(ctx context.Context, fl *fleet, out io.Writer) error {
	story := &demoStory{previews: map[string]string{}}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scriptDone := make(chan struct{})
	go func() {
		defer close(scriptDone)
		playHuman(ctx, fl, story, out)
	}()
	_, err := fl.sv.RunUntilDone(ctx)
	cancel()
	<-scriptDone
	if err != nil {
		return err
	}
	st := fl.sv.State()
	fmt.Fprintf(out, "demo: %s; head %s at %.12s\n", summarizeTasks(st.Tasks), st.Fleet.HeadRef, st.Fleet.Head)
	var missing []string
	for _, t := range st.Tasks {
		if t.State != supervisor.TaskDone && !isDemoPreview(t.ID) {
			missing = append(missing, fmt.Sprintf("task %s ended %s (%s)", t.ID, t.State, t.Reason))
		}
	}
	for _, p := range demoPreviews {
		if story.previews[p] == "" {
			missing = append(missing, p+" never answered on its endpoint")
		}
	}
	if story.rebased == "" {
		missing = append(missing, demoPreviews[0]+" was not rebased onto the moved head and answered again")
	}
	if len(story.approved) == 0 {
		missing = append(missing, "no escalated publish was approved")
	}
	if !story.pausedResumed {
		missing = append(missing, "the slow agent was not paused and resumed")
	}
	if parent.Err() != nil && len(missing) == 0 {
		missing = append(missing, "interrupted")
	}
	if len(missing) > 0 {
		return exitError{code: exitNotAllDone, msg: "the story did not hold: " + strings.Join(missing, "; ")}
	}
	fmt.Fprintf(out, "demo: the story held: ten tasks, two previews on 4173, one pause and resume, a preview rebased onto the head, %d escalation(s) approved, every task done\n", len(story.approved))
	return nil
}

func isDemoPreview(id string) bool { return id == demoPreviews[0] || id == demoPreviews[1] }

// playHuman polls the fleet as a person glancing at the screen would, and acts.
func playHuman(ctx context.Context, fl *fleet, story *demoStory, out io.Writer) {
	say := func(format string, args ...any) { fmt.Fprintf(out, "human: "+format+"\n", args...) }
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var pausedAt time.Time
	previewsSince := time.Now()
	discarded := false
	rebaseAsked, rebaseNoteText := false, ""
	seenPublish := map[int64]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := fl.sv.State()
		states := map[string]supervisor.TaskState{}
		for _, t := range st.Tasks {
			states[t.ID] = t.State
		}
		// Pause the slow agent once it is under way, and resume it a second later.
		switch {
		case pausedAt.IsZero() && states["slow"] == supervisor.TaskRunning:
			if err := fl.sv.Pause("slow"); err == nil {
				pausedAt = time.Now()
				say("paused slow")
			}
		case !pausedAt.IsZero() && !story.pausedResumed && time.Since(pausedAt) > time.Second:
			if err := fl.sv.Resume("slow"); err == nil {
				story.pausedResumed = true
				say("resumed slow after %s paused", time.Since(pausedAt).Round(100*time.Millisecond))
			}
		}
		// Open both previews in a "browser"; both listen on 4173 in their own sandbox.
		if !discarded {
			leases := activeLeases(fl)
			for _, p := range demoPreviews {
				if story.previews[p] != "" {
					continue
				}
				for _, l := range leases {
					if l.Task == p && l.Port == 4173 && previewAnswers(ctx, l.Endpoint, p) {
						story.previews[p] = l.Endpoint
						say("%s answers on http://%s (its port 4173)", p, l.Endpoint)
					}
				}
			}
			bothAnswered := story.previews[demoPreviews[0]] != "" && story.previews[demoPreviews[1]] != ""
			// Once the head has moved past preview-a's base, carry it onto the head; it
			// must then answer again, on its new session's endpoint.
			if bothAnswered && !rebaseAsked && behindHead(st, demoPreviews[0]) {
				rebaseAsked = true
				res, err := fl.sv.Rebase(demoPreviews[0])
				if err != nil {
					say("rebase %s: %v", demoPreviews[0], err)
				} else {
					rebaseNoteText = rebaseNote(res)
					say("rebased %s onto the head: %s", demoPreviews[0], rebaseNoteText)
					story.previews[demoPreviews[0]] = ""
					continue
				}
			}
			if rebaseAsked && story.rebased == "" && story.previews[demoPreviews[0]] != "" {
				story.rebased = rebaseNoteText
			}
			if (bothAnswered && story.rebased != "") || time.Since(previewsSince) > 60*time.Second {
				// Persistent previews live until discarded; the story ends with them.
				for _, p := range demoPreviews {
					if err := fl.sv.Discard(p); err != nil && !errors.Is(err, supervisor.ErrNotApplicable) {
						say("discard %s: %v", p, err)
					}
				}
				discarded = true
				say("closed both previews")
			}
		}
		// Read the publishes: note rejections, approve what waits for a human.
		var pubs []supervisor.Publish
		fl.db.View(func(r supervisor.Reader) error {
			var err error
			pubs, err = r.Publishes()
			return err
		})
		for _, p := range pubs {
			if seenPublish[p.ID] || p.Outcome == "queued" {
				continue
			}
			seenPublish[p.ID] = true
			switch p.Outcome {
			case supervisor.OutcomeRejected:
				story.rejected = true
				say("%s was rejected (%s); it retries at the new head", p.Task, p.Message)
			case supervisor.OutcomeEscalated:
				if err := fl.sv.Approve(p.ID); err != nil {
					say("approve publish %d of %s: %v", p.ID, p.Task, err)
					continue
				}
				story.approved = append(story.approved, p.ID)
				say("approved %s's escalated publish %d", p.Task, p.ID)
			default:
				say("%s published: %s", p.Task, p.Outcome)
			}
		}
	}
}

func activeLeases(fl *fleet) []supervisor.Lease {
	var leases []supervisor.Lease
	fl.db.View(func(r supervisor.Reader) error {
		var err error
		leases, err = r.Leases(true)
		return err
	})
	return leases
}

// previewAnswers fetches the preview's whoami page and checks it is that task's server.
func previewAnswers(ctx context.Context, endpoint, task string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/whoami", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), task)
}

// behindHead reports whether the task's live session started before the head's
// latest commit.
func behindHead(st supervisor.FleetState, task string) bool {
	for _, s := range st.Sessions {
		if s.Task == task {
			return s.Base != st.Fleet.Head
		}
	}
	return false
}
