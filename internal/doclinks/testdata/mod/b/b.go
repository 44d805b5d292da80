// Package b is linked to.
package b

// Thing is linked to.
var Thing = 1
