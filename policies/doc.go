// Package policies holds pure rules — path/merge policy, admission and quota — with their
// defaults and validation. It imports no package of corral's.
package policies
