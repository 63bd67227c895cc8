package vmcore

import "errors"

// ErrUnrecognizedFormat means no opener recognised the file: it is neither
// an ELF core nor a kdump-compressed file, plain or wrapped in xz, zstd or
// gzip.
var ErrUnrecognizedFormat = errors.New("vmcore: unrecognized dump format")

// ErrTooLarge means a compressed wrapper decompressed to more than
// Options.MaxDecompressedSize.
var ErrTooLarge = errors.New("vmcore: decompressed dump exceeds size limit")
