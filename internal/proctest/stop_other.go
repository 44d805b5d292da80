//go:build !unix

package proctest

import "errors"

// stopSelf cannot stop the process: there is no SIGSTOP here.
func stopSelf() error { return errors.New("proctest: -pause needs a Unix system (SIGSTOP)") }
