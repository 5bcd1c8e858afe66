package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// waitInbox waits for an open inbox item of the task.
func waitInbox(t *testing.T, fl *fleet, task string) supervisor.InboxItem {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, it := range fl.sv.Inbox() {
			if it.Task == task && it.State == supervisor.InboxOpen {
				return it
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no inbox item for task %s", task)
	return supervisor.InboxItem{}
}

func waitTaskState(t *testing.T, fl *fleet, task string, want supervisor.TaskState) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last supervisor.TaskState
	for time.Now().Before(deadline) {
		for _, tk := range fl.sv.State().Tasks {
			if tk.ID == task {
				if last = tk.State; last == want {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s is %s, want %s", task, last, want)
}

// TestNeedsInput: an agent stalled on a y/N prompt becomes a permission item with its
// last screen, and the answer typed into its terminal lets it finish; an agent that
// asks through `corral ctl ask` gets the answer back as the command's output.
func TestNeedsInput(t *testing.T) {
	requireRoot(t)
	fl, dir := liveFleet(t, `
[fleet]
repo = "."
base = "main"
launch_interval = "50ms"
needs_input_after = "300ms"

[defaults]
retries = 0

[[task]]
id = "yn"
agent = "sh agents/ask-yn.sh"

[[task]]
id = "asker"
agent = "sh agents/ask-ctl.sh"
`)
	it := waitInbox(t, fl, "yn")
	if it.Kind != supervisor.InboxPermission || it.Asked || !strings.Contains(it.Text, "[y/N]") || !strings.Contains(it.Screen, "Overwrite config.txt?") {
		t.Errorf("noticed prompt: %+v", it)
	}
	if err := fl.sv.AnswerInbox(it.ID, "y"); err != nil {
		t.Fatal(err)
	}
	waitTaskState(t, fl, "yn", supervisor.TaskDone)
	if got := headFile(t, dir, "config.txt"); got != "overwritten\n" {
		t.Errorf("config.txt on the head: %q", got)
	}

	q := waitInbox(t, fl, "asker")
	if q.Kind != supervisor.InboxNeedsInput || !q.Asked || q.Text != "Which colour should the button be?" {
		t.Errorf("asked item: %+v", q)
	}
	// Another terminal lists it and answers it through the fleet's records.
	code, out, errOut := runMain("inbox", "--repo", dir, "--json")
	if code != 0 || !strings.Contains(out, "Which colour should the button be?") {
		t.Errorf("corral inbox: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runMain("answer", "--repo", dir, strconv.FormatInt(q.ID, 10), "teal"); code != 0 {
		t.Fatalf("corral answer: exit %d %s %s", code, out, errOut)
	}
	waitTaskState(t, fl, "asker", supervisor.TaskDone)
	if got := headFile(t, dir, "colour.txt"); got != "teal\n" {
		t.Errorf("colour.txt on the head: %q", got)
	}
	for _, it := range fl.sv.Inbox() {
		if it.State == supervisor.InboxOpen {
			t.Errorf("item still open after its answer: %+v", it)
		}
	}
	if code, _, errOut := runMain("answer", "--repo", dir, strconv.FormatInt(q.ID, 10), "again"); code != exitBadInput || !strings.Contains(errOut, "answered") {
		t.Errorf("answering a closed item: exit %d %s", code, errOut)
	}
}
