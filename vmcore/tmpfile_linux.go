package vmcore

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// newTempFile creates a file in dir for decompressing into. On Linux it is
// an unnamed O_TMPFILE file: a run that is interrupted, however, leaves
// nothing behind, and link gives it a name only once it is complete. Where
// the file system has no O_TMPFILE a named temporary file is used, which
// discard removes.
func newTempFile(dir string) (*tempFile, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return &tempFile{File: os.NewFile(uintptr(fd), dir+"/(unnamed)"), unnamed: true}, nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	f, err := os.CreateTemp(dir, "kdump-syms-*.vmcore")
	if err != nil {
		return nil, err
	}
	return &tempFile{File: f}, nil
}

// path is a name the file can be opened by while it is open.
func (t *tempFile) path() string {
	if t.unnamed {
		return fmt.Sprintf("/proc/self/fd/%d", t.Fd())
	}
	return t.Name()
}

// link gives the complete file the name name. It fails with an error
// matching os.ErrExist when name exists.
func (t *tempFile) link(name string) error {
	if !t.unnamed {
		if _, err := os.Lstat(name); err == nil {
			return &os.LinkError{Op: "rename", Old: t.Name(), New: name, Err: os.ErrExist}
		}
		return os.Rename(t.Name(), name)
	}
	if err := unix.Linkat(unix.AT_FDCWD, t.path(), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "linkat", Old: t.path(), New: name, Err: err}
	}
	return nil
}
