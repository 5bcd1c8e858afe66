package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"corral/supervisor"
)

// Seq and Time are assigned at insert: Seq strictly increasing in the order Updates
// from one goroutine return, Time the clock's when zero and the caller's otherwise.
func TestEventOrderSerialized(t *testing.T) {
	db := openTest(t, WithNow(fixedClock()))
	var returned []supervisor.Event
	given := t0.Add(-time.Hour).In(time.FixedZone("X", 3600))
	for i := range 50 {
		returned = append(returned, update(t, db, func(tx supervisor.Tx) error {
			for j := range 3 {
				e := supervisor.Event{Kind: "test.step", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d}`, i, j))}
				if j == 2 {
					e.Time = given
				}
				tx.Emit(e)
			}
			return nil
		})...)
	}
	for i, e := range returned {
		if i > 0 && e.Seq <= returned[i-1].Seq {
			t.Fatalf("event %d: seq %d after %d", i, e.Seq, returned[i-1].Seq)
		}
		want := t0
		if i%3 == 2 {
			want = given
		}
		if !e.Time.Equal(want) {
			t.Errorf("event %d: time %v, want %v", i, e.Time, want)
		}
	}
	view(t, db, func(r supervisor.Reader) error {
		stored, err := r.Events(0, 0)
		if err != nil || len(stored) != len(returned) {
			t.Fatalf("Events: %d, %v; want %d", len(stored), err, len(returned))
		}
		for i := range stored {
			s, e := stored[i], returned[i]
			if s.Seq != e.Seq || !s.Time.Equal(e.Time) || string(s.Data) != string(e.Data) {
				t.Errorf("event %d: stored %+v, returned %+v", i, s, e)
			}
		}
		return nil
	})
}

// With concurrent writers every seq is unique, and each writer's events are stored in
// the order it emitted them.
func TestEventOrderConcurrentWriters(t *testing.T) {
	db := openTest(t)
	const writers, updates, perUpdate = 8, 40, 3
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			last := int64(0)
			for u := range updates {
				evs, err := db.Update(func(tx supervisor.Tx) error {
					for k := range perUpdate {
						tx.Emit(supervisor.Event{Kind: "test.write", Session: fmt.Sprint(w),
							Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, u*perUpdate+k))})
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range evs {
					if e.Seq <= last {
						t.Errorf("writer %d: seq %d after %d", w, e.Seq, last)
					}
					last = e.Seq
				}
			}
		})
	}
	wg.Wait()
	view(t, db, func(r supervisor.Reader) error {
		evs, err := r.Events(0, 0)
		if err != nil || len(evs) != writers*updates*perUpdate {
			t.Fatalf("Events: %d, %v", len(evs), err)
		}
		next := map[string]int{}
		for i, e := range evs {
			if i > 0 && e.Seq <= evs[i-1].Seq {
				t.Fatalf("stored seq %d after %d", e.Seq, evs[i-1].Seq)
			}
			var d struct{ N int }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.N != next[e.Session] {
				t.Fatalf("writer %s: event %d stored where %d was due", e.Session, d.N, next[e.Session])
			}
			next[e.Session]++
		}
		return nil
	})
	t.Logf("%d updates in %d group commits", db.updates.Load(), db.groups.Load())
}

// Readers run during writes and always see a whole commit: each Update adds one task
// and its one event, so a consistent snapshot has as many of each.
func TestReadersDuringWrites(t *testing.T) {
	db := openTest(t)
	var stop atomic.Bool
	var readers, writers sync.WaitGroup
	var views atomic.Int64
	for range 4 {
		readers.Go(func() {
			for !stop.Load() {
				err := db.View(func(r supervisor.Reader) error {
					tasks, err := r.Tasks()
					if err != nil {
						return err
					}
					evs, err := r.Events(0, 0)
					if err != nil {
						return err
					}
					if len(tasks) != len(evs) {
						return fmt.Errorf("snapshot with %d tasks but %d events", len(tasks), len(evs))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				views.Add(1)
			}
		})
	}
	for w := range 4 {
		writers.Go(func() {
			for i := range 100 {
				_, err := db.Update(func(tx supervisor.Tx) error {
					id := fmt.Sprintf("w%d-%d", w, i)
					if err := tx.PutTask(task(id)); err != nil {
						return err
					}
					tx.Emit(supervisor.Event{Kind: supervisor.EvTaskQueued, Task: id})
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	if views.Load() == 0 {
		t.Error("no View completed while writing")
	}
	t.Logf("%d views during 400 updates", views.Load())
}

func TestEventsPaging(t *testing.T) {
	db := openTest(t)
	update(t, db, func(tx supervisor.Tx) error {
		for range 25 {
			tx.Emit(supervisor.Event{Kind: "test.page"})
		}
		return nil
	})
	view(t, db, func(r supervisor.Reader) error {
		var after int64
		var sizes []int
		for {
			page, err := r.Events(after, 10)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			if page[0].Seq != after+1 {
				t.Errorf("page after %d starts at %d", after, page[0].Seq)
			}
			sizes = append(sizes, len(page))
			after = page[len(page)-1].Seq
		}
		if fmt.Sprint(sizes) != "[10 10 5]" || after != 25 {
			t.Errorf("pages of %v ending at %d; want [10 10 5] ending at 25", sizes, after)
		}
		if all, err := r.Events(0, 0); err != nil || len(all) != 25 {
			t.Errorf("Events(0, 0): %d, %v; want all 25", len(all), err)
		}
		if tail, err := r.Events(20, 100); err != nil || len(tail) != 5 || tail[0].Seq != 21 {
			t.Errorf("Events(20, 100): %+v, %v", tail, err)
		}
		return nil
	})
}
