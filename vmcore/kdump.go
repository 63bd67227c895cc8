package vmcore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// kdumpOpener recognises kdump-compressed files. Until package diskdump
// lands it reports them as unsupported rather than unrecognized, so that
// the error says what the file is.
var kdumpOpener = opener{
	name: "kdump",
	openPath: func(paths []string) (backend, string, error) {
		fh, err := os.Open(paths[0])
		if err != nil {
			return nil, "", err
		}
		defer fh.Close()
		return probeKdump(fh)
	},
	openRA: func(r io.ReaderAt, size int64) (backend, string, error) { return probeKdump(r) },
}

func probeKdump(r io.ReaderAt) (backend, string, error) {
	var sig [16]byte
	n, _ := r.ReadAt(sig[:], 0)
	switch {
	case n >= 8 && (string(sig[:8]) == "KDUMP   " || string(sig[:8]) == "DISKDUMP"):
		return nil, "", fmt.Errorf("kdump-compressed dump: %w", errors.ErrUnsupported)
	case n == 16 && bytes.Equal(sig[:], []byte("makedumpfile\x00\x00\x00\x00")):
		return nil, "", fmt.Errorf("flattened makedumpfile dump: %w", errors.ErrUnsupported)
	}
	return nil, "", ErrUnrecognizedFormat
}
