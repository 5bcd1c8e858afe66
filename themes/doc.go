// Package themes holds corral's embedded colour skins and their loader. It imports no
// package of corral's.
package themes
