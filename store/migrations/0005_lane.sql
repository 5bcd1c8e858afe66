-- 0003: the integration lane — its policy on the fleet, accept checks and repair links
-- on tasks, and one row per lane run (a tested head, bisection probe or candidate).

ALTER TABLE fleet ADD COLUMN lane TEXT NOT NULL DEFAULT '{}'; -- JSON of supervisor.Lane

ALTER TABLE tasks ADD COLUMN accept  TEXT    NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0; -- the lane run it repairs, 0 if none

CREATE TABLE lane_runs (
	id          INTEGER PRIMARY KEY,
	kind        TEXT    NOT NULL,
	commit_id   TEXT    NOT NULL,
	publish     INTEGER NOT NULL, -- 0 when none (not a foreign key: candidates have none yet)
	batch       TEXT    NOT NULL, -- JSON
	outcome     TEXT    NOT NULL,
	culprit     INTEGER NOT NULL,
	runs        INTEGER NOT NULL,
	session     TEXT    NOT NULL,
	output      TEXT    NOT NULL,
	record      TEXT    NOT NULL,
	started     INTEGER,
	ended       INTEGER
);
