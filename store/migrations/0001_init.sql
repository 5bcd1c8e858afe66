-- 0001: the core records of DESIGN.md's vocabulary and the event log.
--
-- Conventions for every table:
--   * times are INTEGER unix nanoseconds, NULL for Go's zero time, so ranges
--     (usage since T) compare as numbers and never depend on a zone;
--   * durations are INTEGER nanoseconds;
--   * slices are JSON text (json.Marshal output: "null" for nil, "[]" for empty);
--   * column names avoid SQL keywords (AFTER, END, PLAN) rather than quoting them.
-- Foreign keys are immediate, not deferred: a deferred violation would only show at
-- COMMIT and fail every Update in a group commit, not just the one at fault.

CREATE TABLE fleet (
	id          INTEGER PRIMARY KEY CHECK (id = 1), -- one fleet per database
	name        TEXT    NOT NULL,
	repo        TEXT    NOT NULL,
	base_ref    TEXT    NOT NULL,
	base        TEXT    NOT NULL,
	head_ref    TEXT    NOT NULL,
	head        TEXT    NOT NULL,
	plan_file   TEXT    NOT NULL,
	test        TEXT    NOT NULL,
	max_running INTEGER NOT NULL,
	cpu         REAL    NOT NULL,
	memory      INTEGER NOT NULL,
	interval    INTEGER NOT NULL,
	overlap     TEXT    NOT NULL,
	created     INTEGER
);

CREATE TABLE tasks (
	id          TEXT    PRIMARY KEY,
	prompt      TEXT    NOT NULL,
	agent       TEXT    NOT NULL,
	lifetime    TEXT    NOT NULL,
	intent      TEXT    NOT NULL, -- JSON; mirrored row by row in intents
	ports       TEXT    NOT NULL, -- JSON
	cpu         REAL    NOT NULL,
	memory      INTEGER NOT NULL,
	pids        INTEGER NOT NULL,
	network     TEXT    NOT NULL,
	env_files   TEXT    NOT NULL, -- JSON
	priority    INTEGER NOT NULL,
	after_tasks TEXT    NOT NULL, -- JSON
	retries     INTEGER NOT NULL,
	state       TEXT    NOT NULL,
	attempts    INTEGER NOT NULL,
	reason      TEXT    NOT NULL,
	created     INTEGER,
	updated     INTEGER
);

-- One row per declared glob, so overlap checks can be done in SQL later.
CREATE TABLE intents (
	task TEXT    NOT NULL REFERENCES tasks (id),
	pos  INTEGER NOT NULL, -- the glob's index in Task.Intent
	glob TEXT    NOT NULL,
	PRIMARY KEY (task, pos)
) WITHOUT ROWID;

CREATE TABLE sessions (
	id        TEXT    PRIMARY KEY,
	task      TEXT    NOT NULL REFERENCES tasks (id),
	attempt   INTEGER NOT NULL,
	base      TEXT    NOT NULL,
	state     TEXT    NOT NULL,
	pid       INTEGER NOT NULL,
	cgroup    TEXT    NOT NULL,
	layer     TEXT    NOT NULL,
	recording TEXT    NOT NULL,
	exit_code INTEGER, -- NULL while it has not exited
	started   INTEGER,
	ended     INTEGER,
	resumes   TEXT    NOT NULL
);

CREATE TABLE leases (
	id       INTEGER PRIMARY KEY,
	session  TEXT    NOT NULL REFERENCES sessions (id),
	task     TEXT    NOT NULL,
	name     TEXT    NOT NULL,
	port     INTEGER NOT NULL,
	endpoint TEXT    NOT NULL,
	started  INTEGER,
	ended    INTEGER -- NULL while held
);

CREATE TABLE usage (
	session     TEXT    NOT NULL REFERENCES sessions (id),
	time        INTEGER NOT NULL,
	cpu         INTEGER NOT NULL,
	cpu_percent REAL    NOT NULL,
	memory      INTEGER NOT NULL, -- uint64 stored bit for bit
	memory_peak INTEGER NOT NULL,
	oom_kills   INTEGER NOT NULL,
	throttled   INTEGER NOT NULL,
	pids        INTEGER NOT NULL
);

CREATE TABLE publishes (
	id       INTEGER PRIMARY KEY,
	task     TEXT    NOT NULL,
	session  TEXT    NOT NULL REFERENCES sessions (id),
	outcome  TEXT    NOT NULL,
	base     TEXT    NOT NULL,
	head     TEXT    NOT NULL,
	new_head TEXT    NOT NULL,
	paths    TEXT    NOT NULL, -- JSON
	message  TEXT    NOT NULL,
	time     INTEGER
);

CREATE TABLE conflicts (
	id       INTEGER PRIMARY KEY,
	publish  INTEGER NOT NULL REFERENCES publishes (id),
	path     TEXT    NOT NULL,
	class    TEXT    NOT NULL,
	base     TEXT    NOT NULL,
	ours     TEXT    NOT NULL,
	theirs   TEXT    NOT NULL,
	moved_by INTEGER -- NULL when unknown; not a foreign key, history may be pruned
);

CREATE INDEX conflicts_publish ON conflicts (publish);

-- seq is the rowid: SQLite gives each insert max(seq)+1, so seqs grow in commit order.
-- Not AUTOINCREMENT: its sqlite_sequence row is one more page written per commit
-- (a third of a single-event Update's cost, measured). The price: a seq could be
-- handed out again only if the newest events were deleted, so pruning the log must
-- always keep the newest one; readers page by "seq > last seen".
CREATE TABLE events (
	seq     INTEGER PRIMARY KEY,
	time    INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	task    TEXT    NOT NULL,
	session TEXT    NOT NULL,
	data    TEXT CHECK (data IS NULL OR json_valid(data))
);
