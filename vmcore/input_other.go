//go:build !unix

package vmcore

import "os"

func openNonblock(name string) (*os.File, error) { return os.Open(name) }
