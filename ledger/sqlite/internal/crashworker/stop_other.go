//go:build !unix

package main

import "errors"

// stopSelf cannot stop the process: there is no SIGSTOP here.
func stopSelf() error { return errors.New("crashworker: -pause needs a Unix system (SIGSTOP)") }
