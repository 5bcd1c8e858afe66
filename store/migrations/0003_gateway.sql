-- 0003: the model gateway's metered calls, and per-task model budgets.

ALTER TABLE tasks ADD COLUMN budget_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN budget_cost   REAL    NOT NULL DEFAULT 0;

CREATE TABLE model_calls (
	id          INTEGER PRIMARY KEY,
	session     TEXT    NOT NULL REFERENCES sessions (id),
	task        TEXT    NOT NULL,
	time        INTEGER NOT NULL,
	upstream    TEXT    NOT NULL,
	model       TEXT    NOT NULL,
	status      INTEGER NOT NULL,
	streamed    INTEGER NOT NULL,
	input       INTEGER NOT NULL,
	output      INTEGER NOT NULL,
	cache_read  INTEGER NOT NULL,
	cache_write INTEGER NOT NULL,
	cost        REAL    NOT NULL,
	latency     INTEGER NOT NULL, -- nanoseconds
	remaining   INTEGER NOT NULL, -- tokens; -1 unknown
	reset       INTEGER,          -- unix nanoseconds; NULL unknown
	utilization REAL    NOT NULL, -- 0..1; -1 unknown
	limits      TEXT    NOT NULL  -- JSON: the rate-limit headers as sent
);

-- A session's calls, and spend per session.
CREATE INDEX model_calls_session ON model_calls (session, id);
