package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"corral/supervisor"
)

// The lane's records go in and come back unchanged: the fleet's lane policy, a task's
// accept check and repair link, and lane runs added then completed.
func TestLaneRecordsRoundTrip(t *testing.T) {
	db := openTest(t)
	lane := supervisor.Lane{Gating: "pre", OnRed: "revert", Narrow: "paths", Reruns: 2, Parallel: 3,
		Timeout: time.Minute, CPU: 1.5, Memory: 1 << 30}
	fleet := supervisor.Fleet{Name: "shop", Repo: "/r", BaseRef: "main", Base: "a", HeadRef: "corral/head", Head: "b",
		Test: "sh test.sh", Lane: lane, Created: t0}
	fix := task("fix-pricing")
	fix.Accept, fix.Repairs = "sh check.sh", 7
	run := supervisor.LaneRun{Kind: supervisor.LaneKindHead, Commit: "c0ffee", Publish: 5, Batch: []int64{3, 4, 5},
		Outcome: supervisor.LaneRunning, Started: t0}
	var id int64
	update(t, db, func(tx supervisor.Tx) error {
		if err := tx.PutFleet(fleet); err != nil {
			return err
		}
		if err := tx.PutTask(fix); err != nil {
			return err
		}
		var err error
		id, err = tx.AddLaneRun(run)
		return err
	})
	run.ID = id
	done := run
	done.Outcome, done.Culprit, done.Runs, done.Session, done.Output, done.Record, done.Ended =
		supervisor.LaneRed, 4, 2, "lane1-2", "FAIL\n", "/r/.git/corral/lane/1.out", t0.Add(time.Second)
	update(t, db, func(tx supervisor.Tx) error {
		if err := tx.PutLaneRun(supervisor.LaneRun{}); err == nil {
			t.Error("PutLaneRun without an id succeeded")
		}
		return tx.PutLaneRun(done)
	})
	view(t, db, func(r supervisor.Reader) error {
		f, err := r.Fleet()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(f.Lane, lane) {
			t.Errorf("fleet lane = %+v, want %+v", f.Lane, lane)
		}
		got, err := r.Task("fix-pricing")
		if err != nil {
			return err
		}
		if got.Accept != fix.Accept || got.Repairs != 7 {
			t.Errorf("task accept/repairs = %q/%d", got.Accept, got.Repairs)
		}
		runs, err := r.LaneRuns()
		if err != nil {
			return err
		}
		if len(runs) != 1 || !reflect.DeepEqual(runs[0], done) {
			t.Errorf("lane runs = %+v, want [%+v]", runs, done)
		}
		return nil
	})
	if _, err := db.Update(func(tx supervisor.Tx) error { return tx.PutLaneRun(supervisor.LaneRun{Commit: "x"}) }); err == nil ||
		errors.Is(err, supervisor.ErrNotFound) {
		t.Errorf("PutLaneRun(no id) = %v, want an error saying so", err)
	}
}
