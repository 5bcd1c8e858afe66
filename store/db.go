package store

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver (cgo)

	"corral/supervisor"
)

// ErrClosed is returned by Update and View after Close.
var ErrClosed = errors.New("store is closed")

// DB is the fleet's database: one writer connection owned by a group-commit goroutine,
// and a pool of read-only connections. In WAL mode readers see the last commit and
// never wait for the writer, so the TUI polling the store cannot slow the supervisor.
type DB struct {
	path string
	now  func() time.Time

	w *sql.DB // exactly one connection; only the writer goroutine uses it after Open
	r *sql.DB // read-only connections for View

	// mu guards closed and the send on reqs, so Update never sends on a closed channel.
	mu      sync.RWMutex
	closed  bool
	reqs    chan *request
	stopped chan struct{} // closed when the writer goroutine has returned

	groups  atomic.Int64 // transactions committed by the writer, for tests and stats
	updates atomic.Int64 // Update calls those transactions carried
}

var _ supervisor.Store = (*DB)(nil)

// Option configures Open.
type Option func(*DB)

// WithNow sets the clock used for event and usage times left zero, and migration
// records; tests pass a fixed clock.
func WithNow(now func() time.Time) Option {
	return func(db *DB) { db.now = now }
}

// Connection parameters (mattn/go-sqlite3 DSN keys). WAL lets readers proceed during a
// write; synchronous=NORMAL in WAL mode only syncs at checkpoints, so a power loss can
// drop the last commits but never corrupts the file — the right trade for a supervisor
// that can re-derive a few seconds of state. The busy timeout covers another corral
// process holding the write lock, and WAL recovery after a crash.
const (
	writerParams = "_journal_mode=WAL&_synchronous=NORMAL&_foreign_keys=1&_busy_timeout=5000" +
		"&_txlock=immediate&_stmt_cache_size=64"
	// Readers begin DEFERRED: the snapshot is taken at the first read and held until
	// the transaction ends. mode=ro makes SQLite itself refuse writes through them.
	readerParams = "mode=ro&_foreign_keys=1&_busy_timeout=5000&_txlock=deferred&_stmt_cache_size=32"
)

// Open opens the database at path, creating it (and its directory) if needed, and
// migrates it to the schema this binary knows. A database from a newer corral is
// refused with ErrNewerSchema.
func Open(path string, opts ...Option) (*DB, error) {
	return openAt(path, len(migrations), opts...)
}

// openAt is Open with only the first maxVersion migrations known, so tests can build a
// database as an older corral left it.
func openAt(path string, maxVersion int, opts ...Option) (*DB, error) {
	db := &DB{path: path, now: time.Now}
	for _, o := range opts {
		o(db)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}

	db.w, err = sql.Open("sqlite3", dsn(abs, writerParams))
	if err != nil {
		return nil, fmt.Errorf("store %s: open writer: %w", path, err)
	}
	// One connection, kept forever: SQLite has one writer anyway, and a second
	// connection here would only contend for the lock with busy-waits.
	db.w.SetMaxOpenConns(1)
	db.w.SetMaxIdleConns(1)
	if err := db.checkWAL(); err != nil {
		db.w.Close()
		return nil, err
	}
	if err := migrate(db.w, path, migrations[:maxVersion], db.now); err != nil {
		db.w.Close()
		return nil, err
	}

	// Readers are opened after the writer has created the file and its WAL: a
	// read-only connection can neither create the database nor switch journal mode.
	db.r, err = sql.Open("sqlite3", dsn(abs, readerParams))
	if err != nil {
		db.w.Close()
		return nil, fmt.Errorf("store %s: open readers: %w", path, err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	db.r.SetMaxOpenConns(n)
	db.r.SetMaxIdleConns(n)
	if err := db.r.Ping(); err != nil {
		db.r.Close()
		db.w.Close()
		return nil, fmt.Errorf("store %s: open readers: %w", path, err)
	}

	db.reqs = make(chan *request, maxGroup)
	db.stopped = make(chan struct{})
	go db.run()
	return db, nil
}

// checkWAL opens the writer connection and confirms WAL took effect: on a filesystem
// without shared memory support SQLite silently keeps a rollback journal, and then
// readers would block behind every write.
func (db *DB) checkWAL() error {
	var mode string
	if err := db.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("store %s: open: %w", db.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("store %s: journal_mode is %q, want wal (does the filesystem support it?)", db.path, mode)
	}
	return nil
}

// dsn builds a file: URI. SQLite decodes %HH in the path and ends it at '?' or '#', so
// those three are escaped; the path is absolute, so it cannot start with "//" and be
// taken for an authority.
func dsn(abs, params string) string {
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	return "file:" + p + "?" + params
}

// Path returns the database file's path as given to Open.
func (db *DB) Path() string { return db.path }

// SchemaVersion returns the highest migration applied to the database.
func (db *DB) SchemaVersion() (int, error) {
	v, err := schemaVersion(db.r)
	if err != nil {
		return 0, fmt.Errorf("store %s: schema version: %w", db.path, err)
	}
	return v, nil
}

// View runs fn in a read transaction on a read-only connection: every read in fn sees
// the same committed state, and it never waits for the writer. fn's error is returned
// as is.
func (db *DB) View(fn func(supervisor.Reader) error) error {
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		return fmt.Errorf("store %s: view: %w", db.path, ErrClosed)
	}
	tx, err := db.r.Begin()
	if err != nil {
		return fmt.Errorf("store %s: begin read: %w", db.path, err)
	}
	defer tx.Rollback() // read-only: nothing to commit, and it runs on panic too
	return fn(reader{q: tx})
}

// Close stops accepting updates, lets the writer commit everything already queued, and
// closes the database. Closing the last connection checkpoints the WAL into the file.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	close(db.reqs)
	db.mu.Unlock()
	<-db.stopped

	var errs []error
	if err := db.r.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store %s: close readers: %w", db.path, err))
	}
	// Keep the query planner's statistics fresh for the next open; cheap when nothing
	// changed, and an error here is not worth failing Close for.
	_, _ = db.w.Exec(`PRAGMA optimize`)
	if err := db.w.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store %s: close: %w", db.path, err))
	}
	return errors.Join(errs...)
}
