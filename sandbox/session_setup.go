package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// toolchainDirs are the host directories every sandbox sees read-only: the system's
// programs, libraries and configuration. Missing ones are skipped.
var toolchainDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix"}

// ErrInvalidConfig and ErrPortLeased classify bad input: a session configuration that
// cannot work, and a port someone already holds.
var (
	ErrInvalidConfig = errors.New("invalid session")
	ErrPortLeased    = errors.New("port already leased")
)

// classedError puts an error in a class (errors.Is) without changing its message.
type classedError struct{ class, err error }

func (e classedError) Error() string   { return e.err.Error() }
func (e classedError) Unwrap() []error { return []error{e.err, e.class} }

func classed(class, err error) error { return classedError{class, err} }

// validateSession checks a configuration before anything is created, and fills in
// defaults. Every error names the field and the value.
func validateSession(cfg *SessionConfig) error {
	if err := checkSession(cfg); err != nil {
		return classed(ErrInvalidConfig, err)
	}
	return nil
}

func checkSession(cfg *SessionConfig) error {
	if !sessionIDPattern.MatchString(cfg.ID) {
		return fmt.Errorf("session id %q: use lowercase letters, digits, '.', '_' or '-' (at most 63)", cfg.ID)
	}
	if cfg.Snapshot == nil || len(cfg.Snapshot.Layers) == 0 {
		return fmt.Errorf("session %s: no snapshot", cfg.ID)
	}
	if len(cfg.Command) == 0 {
		return fmt.Errorf("session %s: no command", cfg.ID)
	}
	switch cfg.Network {
	case "":
		cfg.Network = NetPrivate
	case NetPrivate, NetHost:
	default:
		return fmt.Errorf("session %s: network %q: want %q or %q", cfg.ID, cfg.Network, NetPrivate, NetHost)
	}
	inside, host := map[int]bool{}, map[int]bool{}
	for _, p := range cfg.Ports {
		if p.Inside < 1 || p.Inside > 65535 {
			return fmt.Errorf("session %s: port %d: out of range 1-65535", cfg.ID, p.Inside)
		}
		if p.Host < 0 || p.Host > 65535 {
			return fmt.Errorf("session %s: host port %d: out of range 1-65535", cfg.ID, p.Host)
		}
		if inside[p.Inside] {
			return classed(ErrPortLeased, fmt.Errorf("session %s: port %d: already leased by this session", cfg.ID, p.Inside))
		}
		if p.Host != 0 && host[p.Host] {
			return classed(ErrPortLeased, fmt.Errorf("session %s: host port %d: already leased by this session", cfg.ID, p.Host))
		}
		inside[p.Inside], host[p.Host] = true, true
	}
	for _, e := range cfg.EnvFiles {
		clean := filepath.Clean(e)
		if filepath.IsAbs(e) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || clean == ".git" || strings.HasPrefix(clean, ".git/") {
			return fmt.Errorf("session %s: env file %q: must be a path inside the work tree, outside .git", cfg.ID, e)
		}
	}
	for _, b := range cfg.Binds {
		if !filepath.IsAbs(b.Path) {
			return fmt.Errorf("session %s: bind %q: must be an absolute host path", cfg.ID, b.Path)
		}
		if b.Target != "" && (!filepath.IsAbs(b.Target) || filepath.Clean(b.Target) == "/") {
			return fmt.Errorf("session %s: bind %s: target %q must be an absolute path below /", cfg.ID, b.Path, b.Target)
		}
		if _, err := os.Stat(b.Path); err != nil {
			return fmt.Errorf("session %s: bind %s: %w", cfg.ID, b.Path, err)
		}
		for _, own := range []string{cfg.Repo.WorkTree, cfg.Repo.GitDir} {
			if within(b.Path, own) || within(own, b.Path) {
				return fmt.Errorf("session %s: bind %s: overlaps the repository (%s); the workspace is the sandbox's own", cfg.ID, b.Path, own)
			}
		}
	}
	if cfg.Cols <= 0 {
		cfg.Cols = 120
	}
	if cfg.Rows <= 0 {
		cfg.Rows = 40
	}
	if cfg.User == nil {
		u, err := InvokingUser()
		if err != nil {
			return fmt.Errorf("session %s: %w", cfg.ID, err)
		}
		cfg.User = u
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// InvokingUser is who agents run as: the user behind sudo when the supervisor runs
// under sudo, otherwise the current user.
func InvokingUser() (*User, error) {
	uid := os.Getuid()
	if s := os.Getenv("SUDO_UID"); s != "" && os.Geteuid() == 0 {
		if n, err := strconv.Atoi(s); err == nil {
			uid = n
		}
	}
	return LookupUser(uid)
}

// LookupUser describes the user with this uid from the host's user database.
func LookupUser(uid int) (*User, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil, fmt.Errorf("user %d: %w", uid, err)
	}
	gid, _ := strconv.Atoi(u.Gid)
	out := &User{UID: uid, GID: gid, Name: u.Username, Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.Atoi(g); err == nil && n != gid {
				out.Groups = append(out.Groups, n)
			}
		}
	}
	if out.Home == "" || out.Home == "/" {
		out.Home = "/home/" + u.Username
	}
	return out, nil
}

// toolchainBinds lists the host paths every sandbox of repo sees read-only: the
// system's programs, libraries and configuration (base), and directories on PATH that
// live under HOME (a toolchain such as pyenv, cargo or go), which must be mounted after
// the sandbox's private HOME (home).
func toolchainBinds(repo Repo) (base, home []Bind) {
	covered := func(p string) bool {
		for _, b := range append(base, home...) {
			if within(p, b.Path) {
				return true
			}
		}
		return false
	}
	for _, d := range toolchainDirs {
		if _, err := os.Lstat(d); err == nil {
			base = append(base, Bind{Path: d})
		}
	}
	hostHome := os.Getenv("HOME")
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(d) || covered(d) || within(d, repo.WorkTree) || within(d, repo.GitDir) {
			continue
		}
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if hostHome == "" || hostHome == "/" || !within(d, hostHome) || d == hostHome {
			base = append(base, Bind{Path: d})
			continue
		}
		// A toolchain under HOME needs more than its bin dir (pyenv's shims call into
		// its versions): bind the top directory under HOME.
		rel, _ := filepath.Rel(hostHome, d)
		top := filepath.Join(hostHome, strings.SplitN(rel, "/", 2)[0])
		if !covered(top) {
			home = append(home, Bind{Path: top})
		}
	}
	return base, home
}

// buildEnvLayer makes the read-only env layer: the named work-tree paths (gitignored
// files such as .env or node_modules) linked into dst. Hard links make it cheap; the
// overlay never writes a lower layer, so the user's files are safe.
func buildEnvLayer(workTree, dst string, paths []string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, p := range paths {
		src := filepath.Join(workTree, p)
		if _, err := os.Lstat(src); err != nil {
			return fmt.Errorf("env file %s: not found in the work tree %s", p, workTree)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, p)), 0o755); err != nil {
			return err
		}
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(workTree, path)
			to := filepath.Join(dst, rel)
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case d.IsDir():
				return os.Mkdir(to, info.Mode().Perm())
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(path)
				if err != nil {
					return err
				}
				return os.Symlink(target, to)
			case info.Mode().IsRegular():
				if err := os.Link(path, to); err == nil {
					return nil
				}
				return copyFile(path, to, info.Mode().Perm())
			}
			return nil // sockets, fifos, devices: not part of an env layer
		})
		if err != nil {
			return fmt.Errorf("env file %s: %w", p, err)
		}
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ListSessions reads the metadata of every session layer on disk, running or not.
func ListSessions(repo Repo) ([]SessionMeta, error) {
	entries, err := os.ReadDir(filepath.Join(repo.StateDir, "w"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SessionMeta
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(repo.StateDir, "w", e.Name(), "meta.json"))
		if err != nil {
			continue // a half-made session dir from a crash; Reap reports it
		}
		var m SessionMeta
		if json.Unmarshal(data, &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// ReapReport says what a cleanup after a crash found.
type ReapReport struct {
	Mounts  []string `json:"mounts"`  // stale mounts under corral's state, unmounted
	Cgroups []string `json:"cgroups"` // stale cgroups of this fleet, killed and removed
	Layers  []string `json:"layers"`  // sessions not live whose private layers are kept on disk
}

// Reap cleans up after a supervisor that crashed: it unmounts mounts under this
// repository's corral state and kills and removes this fleet's cgroups that belong
// neither to a live session nor to this process's own spare inits. Private layers are
// kept (an agent that dies keeps its work) and listed; DiscardSession removes one.
// Nothing outside this fleet is touched.
func Reap(repo Repo, live func(id string) bool) (ReapReport, error) {
	var rep ReapReport
	var errs []error
	mounts, err := unmountUnder(repo.StateDir)
	rep.Mounts = mounts
	errs = append(errs, err)

	// A session's cgroup is named in its metadata (a session started from a spare
	// keeps the spare's group).
	liveGroups := map[string]bool{}
	metas, _ := ListSessions(repo)
	for _, m := range metas {
		if live(m.ID) {
			liveGroups[m.Cgroup] = true
		}
	}
	prefix := CgroupPrefix(repo)
	ownSpares := fmt.Sprintf("%spool-%d-", prefix, os.Getpid())
	cgs, err := ReapCgroups(FleetKey(repo), func(name string) bool {
		return liveGroups[name] || strings.HasPrefix(name, ownSpares) || live(strings.TrimPrefix(name, prefix))
	})
	rep.Cgroups = cgs
	errs = append(errs, err)
	entries, _ := os.ReadDir(filepath.Join(repo.StateDir, "w"))
	for _, e := range entries {
		if !live(e.Name()) {
			rep.Layers = append(rep.Layers, e.Name())
			// Scratch dirs of a dead session are worth nothing; its upper layer is.
			os.RemoveAll(filepath.Join(repo.StateDir, "w", e.Name(), "k"))
		}
	}
	return rep, errors.Join(errs...)
}

// DiscardSession removes a finished session's layer, recording and metadata.
func DiscardSession(repo Repo, id string) error {
	if !sessionIDPattern.MatchString(id) {
		return fmt.Errorf("session id %q: invalid", id)
	}
	dir := sessionDir(repo, id)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	if _, err := unmountUnder(dir); err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	return os.RemoveAll(dir)
}
