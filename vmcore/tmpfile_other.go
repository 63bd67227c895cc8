//go:build !linux

package vmcore

import "os"

// newTempFile creates a named temporary file in dir, which discard removes.
func newTempFile(dir string) (*tempFile, error) {
	f, err := os.CreateTemp(dir, "kdump-syms-*.vmcore")
	if err != nil {
		return nil, err
	}
	return &tempFile{File: f}, nil
}

func (t *tempFile) path() string { return t.Name() }

func (t *tempFile) link(name string) error {
	if _, err := os.Lstat(name); err == nil {
		return &os.LinkError{Op: "rename", Old: t.Name(), New: name, Err: os.ErrExist}
	}
	return os.Rename(t.Name(), name)
}
