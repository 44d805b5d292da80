// Package a has a doc link of every kind, good and broken: [Good],
// [Bad], [fmt.Println], [fmt.Nope], [b.Thing], [b.Missing], [T.M],
// [T.Nope], [json.Marshal] (encoding/json is not imported), [a.Own],
// [example.com/other.X] (another module: not checked), [io], and prose
// such as s[i] and [0, n).
package a

import (
	"fmt"

	"example.com/m/b"
)

// Good links [T.Field] and [*T], and not [T.missing].
func Good() { fmt.Println(b.Thing) }

// T is a type.
type T struct{ Field int }

// M links [unexported], which is declared but never linked by go doc.
func (T) M() {}

func unexported() {}
