package checkrec

import (
	"fmt"
	"testing"
)

// TestRecords checks that failures are kept with their check's name, a
// subcheck's in its parent's, that Fatal ends the check alone, and that
// Failed tells a failed subcheck from a passing one.
func TestRecords(t *testing.T) {
	r := New("kit", "Check")
	Isolate(func() {
		r.Errorf("first %d", 1)
		ok, bad := r.Sub("ok"), r.Sub("bad")
		Isolate(func() { bad.Fatal("stop") })
		if ok.Failed() || !bad.Failed() || !r.Failed() {
			t.Errorf("Failed: ok %v, bad %v, check %v; want false, true, true", ok.Failed(), bad.Failed(), r.Failed())
		}
		r.Fatalf("end")
		t.Error("Fatalf returned")
	})
	if got, want := fmt.Sprint(r.Errs()), "[kit: Check: first 1 kit: Check/bad: stop kit: Check: end]"; got != want {
		t.Errorf("Errs() = %s; want %s", got, want)
	}
	if New("kit", "Pass").Errs() != nil {
		t.Error("a check without failures has records")
	}
}
