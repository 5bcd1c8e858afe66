// Package sandbox does corral's kernel work: read-only snapshots of git revisions,
// copy-on-write overlay sessions, namespaces and the re-exec'd init, ptys and
// recordings, cgroups, per-session network namespaces and port forwarding, and capture
// of a session's changeset from its private layer. It imports no package of corral's.
package sandbox
