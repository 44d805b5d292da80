//go:build unix

package files_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
)

// The files destination creates files and folders as os.Create and
// os.MkdirAll do: 0666 and 0777 less the umask, not os.CreateTemp's 0600,
// so that the warehouse's readers can read it. The test sets the
// process's umask, so it does not run in parallel.
func TestFilesDestinationHonoursUmask(t *testing.T) {
	for _, umask := range []int{0o022, 0o027, 0o002} {
		old := syscall.Umask(umask)
		dir := filepath.Join(t.TempDir(), "warehouse")
		dest := &files.Destination{Dir: dir}
		p := tranche.PartitionOf(tranche.Day, jan1)
		err := dest.Write(ctxT, []tranche.Batch{{Asset: "a", Column: "day", Partition: p, DAG: "dag", Token: 1,
			Rows: []tranche.Row{{"day": p.Key()}}}})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		wantFile, wantDir := fs.FileMode(0o666&^umask), fs.FileMode(0o777&^umask)
		file := dest.Path("a", "day", p.Key())
		for path, want := range map[string]fs.FileMode{
			file: wantFile, filepath.Join(filepath.Dir(file), ".fence"): wantFile,
			filepath.Dir(file): wantDir, filepath.Join(dir, "a"): wantDir, dir: wantDir,
		} {
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != want {
				t.Errorf("umask %03o: %s has mode %03o; want %03o", umask, path, got, want)
			}
		}
	}
}
